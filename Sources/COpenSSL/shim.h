#ifndef MAMFS_COPENSSL_SHIM_H
#define MAMFS_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#endif
