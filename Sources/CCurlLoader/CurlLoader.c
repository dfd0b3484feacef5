#include "CCurlLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The libcurl functions mamfs calls, resolved once by load(). */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    curl_version_info_data *(*version_info)(CURLversion);
} curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Set by load() (under pthread_once, so every caller of mamfs_curl_load sees them after it). */
static int loaded;
static char failure[512];

#define RESOLVE(field, name)                                                              \
    do {                                                                                  \
        *(void **)(&curl.field) = dlsym(library, name);                                   \
        if (!curl.field) {                                                                \
            snprintf(failure, sizeof failure, "libcurl.so.4 has no %s", name);            \
            return;                                                                       \
        }                                                                                 \
    } while (0)

static void load(void) {
    /* RTLD_LOCAL: nothing else in the process binds to libcurl's symbols. Never closed. */
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *message = dlerror();
        snprintf(failure, sizeof failure, "%s", message ? message : "libcurl.so.4 cannot be loaded");
        return;
    }
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_reset, "curl_easy_reset");
    RESOLVE(easy_perform, "curl_easy_perform");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(slist_append, "curl_slist_append");
    RESOLVE(slist_free_all, "curl_slist_free_all");
    RESOLVE(version_info, "curl_version_info");
    CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) {
        snprintf(failure, sizeof failure, "curl_global_init failed: %s", curl.easy_strerror(code));
        return;
    }
    loaded = 1;
}

int mamfs_curl_load(char *reason, size_t size) {
    pthread_once(&once, load);
    if (loaded) return 0;
    if (reason && size > 0) snprintf(reason, size, "%s", failure);
    return -1;
}

CURL *mamfs_curl_easy_init(void) { return curl.easy_init(); }
void mamfs_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
void mamfs_curl_easy_reset(CURL *handle) { curl.easy_reset(handle); }
CURLcode mamfs_curl_easy_perform(CURL *handle) { return curl.easy_perform(handle); }
const char *mamfs_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }
struct curl_slist *mamfs_curl_slist_append(struct curl_slist *list, const char *line) { return curl.slist_append(list, line); }
void mamfs_curl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }
const char *mamfs_curl_version_number(void) { return curl.version_info(CURLVERSION_NOW)->version; }

CURLcode mamfs_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode mamfs_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode mamfs_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode mamfs_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode mamfs_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode mamfs_curl_setopt_callback(CURL *handle, CURLoption option, mamfs_curl_data_callback callback) {
    return curl.easy_setopt(handle, option, callback);
}
CURLcode mamfs_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl.easy_getinfo(handle, info, value);
}
