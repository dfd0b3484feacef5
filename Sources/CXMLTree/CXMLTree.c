#include "CXMLTree.h"
#include <libxml/parser.h>
#include <libxml/tree.h>

void *mamfs_xml_parse(const char *bytes, int length) {
    return xmlReadMemory(bytes, length, "reply.xml", NULL,
                         XML_PARSE_NONET | XML_PARSE_NOBLANKS | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

void mamfs_xml_free(void *document) { xmlFreeDoc((xmlDocPtr)document); }

void *mamfs_xml_root(void *document) { return xmlDocGetRootElement((xmlDocPtr)document); }

void *mamfs_xml_first_element(void *node) { return xmlFirstElementChild((xmlNodePtr)node); }

void *mamfs_xml_next_element(void *node) { return xmlNextElementSibling((xmlNodePtr)node); }

const char *mamfs_xml_name(void *node) { return (const char *)((xmlNodePtr)node)->name; }

const char *mamfs_xml_namespace(void *node) {
    xmlNsPtr ns = ((xmlNodePtr)node)->ns;
    return ns ? (const char *)ns->href : NULL;
}

char *mamfs_xml_text(void *node) { return (char *)xmlNodeGetContent((xmlNodePtr)node); }

void mamfs_xml_free_text(char *text) { xmlFree(text); }

const char *mamfs_xml_version(void) { return xmlParserVersion; }
