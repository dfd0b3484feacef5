#ifndef MAMFS_CCURL_SHIM_H
#define MAMFS_CCURL_SHIM_H
#include <curl/curl.h>

/* The version of the libcurl linked in, e.g. "7.88.1" (CURLVERSION_NOW is a macro Swift cannot import). */
static inline const char *mamfs_curl_version_number(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
}

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   wrapper per argument kind. */
static inline CURLcode mamfs_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode mamfs_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode mamfs_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode mamfs_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode mamfs_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
/* Write, read and header callbacks: size_t (char or void *buffer, size_t size, size_t count, void *context). */
typedef size_t (*mamfs_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);
static inline CURLcode mamfs_curl_setopt_callback(CURL *handle, CURLoption option, mamfs_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}
static inline CURLcode mamfs_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
/* CURLAUTH_BASIC is a macro with a cast Swift does not import. */
static const unsigned long mamfs_curlauth_basic = CURLAUTH_BASIC;
#endif
