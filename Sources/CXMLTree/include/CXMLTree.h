#ifndef MAMFS_CXMLTREE_H
#define MAMFS_CXMLTREE_H
/* A small read-only view of a libxml2 document tree. Swift cannot import libxml2's own
   headers next to Foundation (both bring ICU's headers, in two different versions), so the
   few calls the WebDAV store needs are wrapped here behind opaque pointers. */

/* Parses `length` bytes of XML without network access, entity expansion or DTD loading, and
   without printing errors. Returns the document, or NULL when the bytes are not well formed.
   Free it with mamfs_xml_free. */
void *mamfs_xml_parse(const char *bytes, int length);
void mamfs_xml_free(void *document);
/* The root element of a document, or NULL. */
void *mamfs_xml_root(void *document);
/* The first child element of an element / the next sibling element, or NULL. */
void *mamfs_xml_first_element(void *node);
void *mamfs_xml_next_element(void *node);
/* The element's local name / namespace URI (NULL when it has none); owned by the document. */
const char *mamfs_xml_name(void *node);
const char *mamfs_xml_namespace(void *node);
/* The text of the element and its descendants, malloc'd (free with mamfs_xml_free_text). */
char *mamfs_xml_text(void *node);
void mamfs_xml_free_text(char *text);

/* The version of the libxml2 linked in, e.g. "21004" for 2.10.4 (libxml2's xmlParserVersion). */
const char *mamfs_xml_version(void);
#endif
