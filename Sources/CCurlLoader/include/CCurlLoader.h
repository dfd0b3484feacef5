#ifndef MAMFS_CCURLLOADER_H
#define MAMFS_CCURLLOADER_H
#include <stddef.h>
#include <curl/curl.h>

/* libcurl, loaded with dlopen the first time the WebDAV remote needs it rather than at every
   start of mamfs: libcurl and the thirty libraries it depends on cost a command that never
   speaks HTTP about 6 ms of dynamic linking (docs/PERFORMANCE.md). */

/* Loads libcurl.so.4 and runs curl_global_init, once per process (thread-safe). Returns 0 when
   libcurl is usable; otherwise -1 with the reason (the dynamic loader's message, or the
   symbol or the initialisation that failed) copied into `reason` (NUL-terminated, at most
   `size` bytes), and every later call fails the same way. The functions below may only be
   called after it returned 0. */
int mamfs_curl_load(char *reason, size_t size);

CURL *mamfs_curl_easy_init(void);
void mamfs_curl_easy_cleanup(CURL *handle);
void mamfs_curl_easy_reset(CURL *handle);
CURLcode mamfs_curl_easy_perform(CURL *handle);
const char *mamfs_curl_easy_strerror(CURLcode code);
struct curl_slist *mamfs_curl_slist_append(struct curl_slist *list, const char *line);
void mamfs_curl_slist_free_all(struct curl_slist *list);

/* The version of the libcurl loaded, e.g. "7.88.1" (curl_version_info(CURLVERSION_NOW)). */
const char *mamfs_curl_version_number(void);

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per argument kind. */
CURLcode mamfs_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode mamfs_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode mamfs_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode mamfs_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode mamfs_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
/* Write, read and header callbacks: size_t (char or void *buffer, size_t size, size_t count, void *context). */
typedef size_t (*mamfs_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);
CURLcode mamfs_curl_setopt_callback(CURL *handle, CURLoption option, mamfs_curl_data_callback callback);
CURLcode mamfs_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);

/* CURLAUTH_BASIC is a macro with a cast Swift does not import. */
static const unsigned long mamfs_curlauth_basic = CURLAUTH_BASIC;
#endif
