#ifndef MAMFS_CCURL_SHIM_H
#define MAMFS_CCURL_SHIM_H
/* libcurl's headers only: the library itself is loaded on first use (CCurlLoader). */
#include <curl/curl.h>
#endif
