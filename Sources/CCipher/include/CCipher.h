#ifndef MAMFS_CCIPHER_H
#define MAMFS_CCIPHER_H
#include <stddef.h>

/* AES-256-GCM for one key: a 32-byte key, 12-byte nonces, 16-byte tags, one whole message
   (nonce, additional data, text, tag) per call. The cipher is OpenSSL's. Where OpenSSL's
   provider interface (provider-cipher(7)) offers the default provider's AES-256-GCM, its
   functions are called directly; otherwise every call goes through EVP. Both give the same
   bytes: the direct route is checked against EVP on a known message before it is first used.

   Why: OpenSSL 3.0's EVP_CipherInit_ex asks the provider for the IV length at every call
   (later versions keep it), and EVP_CIPHER_CTX_ctrl turns the tag's request into a parameter
   lookup by name, about a quarter of a microsecond per 4 KiB message here.

   A context is not thread-safe: one per thread, or one per call. */
typedef struct mamfs_gcm mamfs_gcm;

/* A context with `key` (32 bytes) set; its key schedule is kept until mamfs_gcm_free, which
   wipes it. NULL when OpenSSL cannot set up the cipher. */
mamfs_gcm *mamfs_gcm_new(const unsigned char *key);
void mamfs_gcm_free(mamfs_gcm *gcm);
/* The same through EVP whatever the provider offers: to check one route against the other. */
mamfs_gcm *mamfs_gcm_new_evp(const unsigned char *key);

/* Encrypts `length` bytes of `plaintext` into `ciphertext` (the same length; either may be
   NULL when length is 0) and writes the tag (16 bytes) to `tag`. `aad` may be NULL when
   aad_length is 0. Returns 1, or 0 when OpenSSL fails. */
int mamfs_gcm_seal(mamfs_gcm *gcm, const unsigned char *nonce,
                   const unsigned char *aad, size_t aad_length,
                   const unsigned char *plaintext, size_t length,
                   unsigned char *ciphertext, unsigned char *tag);

/* Decrypts into `plaintext` and checks `tag` (16 bytes). Returns 1 when the tag verifies, 0
   when it does not (the text or the additional data was altered), -1 when OpenSSL fails
   before the check. Unless it returns 1, `plaintext` is wiped: no unverified byte is left. */
int mamfs_gcm_open(mamfs_gcm *gcm, const unsigned char *nonce,
                   const unsigned char *aad, size_t aad_length,
                   const unsigned char *ciphertext, size_t length,
                   unsigned char *plaintext, const unsigned char *tag);

/* 1 when contexts call the provider's functions directly, 0 when they use EVP. */
int mamfs_gcm_is_direct(void);
#endif
