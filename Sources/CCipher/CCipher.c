#include "CCipher.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

enum { KEY_SIZE = 32, NONCE_SIZE = 12, TAG_SIZE = 16 };

/* The default provider's AES-256-GCM functions, found once per process. */
static struct {
    EVP_CIPHER *cipher; /* fetched once; keeps its provider loaded for the process's life */
    void *provider_context;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_encrypt_init_fn *encrypt_init;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
    int direct;
} provider;

static pthread_once_t provider_once = PTHREAD_ONCE_INIT;

struct mamfs_gcm {
    void *algorithm_context;  /* the provider's context (direct route) */
    EVP_CIPHER_CTX *evp;      /* or EVP's */
};

/* Is `names` (a colon-separated list, as in OSSL_ALGORITHM) naming AES-256-GCM first? */
static int names_aes_256_gcm(const char *names) {
    static const char wanted[] = "AES-256-GCM";
    return names != NULL && strncmp(names, wanted, sizeof wanted - 1) == 0
        && (names[sizeof wanted - 1] == ':' || names[sizeof wanted - 1] == '\0');
}

static void take_functions(const OSSL_DISPATCH *dispatch) {
    for (; dispatch->function_id != 0; dispatch++) {
        switch (dispatch->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: provider.newctx = OSSL_FUNC_cipher_newctx(dispatch); break;
        case OSSL_FUNC_CIPHER_FREECTX: provider.freectx = OSSL_FUNC_cipher_freectx(dispatch); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: provider.encrypt_init = OSSL_FUNC_cipher_encrypt_init(dispatch); break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT: provider.decrypt_init = OSSL_FUNC_cipher_decrypt_init(dispatch); break;
        case OSSL_FUNC_CIPHER_UPDATE: provider.update = OSSL_FUNC_cipher_update(dispatch); break;
        case OSSL_FUNC_CIPHER_FINAL: provider.final = OSSL_FUNC_cipher_final(dispatch); break;
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: provider.get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(dispatch); break;
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: provider.set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(dispatch); break;
        default: break;
        }
    }
}

static int agrees_with_evp(void);

static void find_provider(void) {
    provider.cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    if (provider.cipher == NULL)
        return;
    const OSSL_PROVIDER *owner = EVP_CIPHER_get0_provider(provider.cipher);
    if (owner == NULL || strcmp(OSSL_PROVIDER_get0_name(owner), "default") != 0)
        return;
    int no_cache = 0;
    const OSSL_ALGORITHM *algorithms = OSSL_PROVIDER_query_operation(owner, OSSL_OP_CIPHER, &no_cache);
    if (algorithms == NULL)
        return;
    for (const OSSL_ALGORITHM *a = algorithms; a->algorithm_names != NULL; a++) {
        if (names_aes_256_gcm(a->algorithm_names)) {
            take_functions(a->implementation);
            break;
        }
    }
    OSSL_PROVIDER_unquery_operation(owner, OSSL_OP_CIPHER, algorithms);
    provider.provider_context = OSSL_PROVIDER_get0_provider_ctx(owner);
    if (provider.newctx && provider.freectx && provider.encrypt_init && provider.decrypt_init
        && provider.update && provider.final && provider.get_ctx_params && provider.set_ctx_params) {
        provider.direct = 1;
        if (!agrees_with_evp())
            provider.direct = 0;
    }
}

static void load(void) {
    pthread_once(&provider_once, find_provider);
}

int mamfs_gcm_is_direct(void) {
    load();
    return provider.direct;
}

static mamfs_gcm *new_context(const unsigned char *key, int direct) {
    mamfs_gcm *gcm = calloc(1, sizeof *gcm);
    if (gcm == NULL)
        return NULL;
    if (direct) {
        gcm->algorithm_context = provider.newctx(provider.provider_context);
        if (gcm->algorithm_context != NULL
            && provider.encrypt_init(gcm->algorithm_context, key, KEY_SIZE, NULL, 0, NULL) == 1)
            return gcm;
    } else {
        const EVP_CIPHER *cipher = provider.cipher != NULL ? provider.cipher : EVP_aes_256_gcm();
        gcm->evp = EVP_CIPHER_CTX_new();
        if (gcm->evp != NULL && EVP_CipherInit_ex(gcm->evp, cipher, NULL, key, NULL, 1) == 1)
            return gcm;
    }
    mamfs_gcm_free(gcm);
    return NULL;
}

mamfs_gcm *mamfs_gcm_new(const unsigned char *key) {
    load();
    return new_context(key, provider.direct);
}

mamfs_gcm *mamfs_gcm_new_evp(const unsigned char *key) {
    load();
    return new_context(key, 0);
}

void mamfs_gcm_free(mamfs_gcm *gcm) {
    if (gcm == NULL)
        return;
    if (gcm->algorithm_context != NULL)
        provider.freectx(gcm->algorithm_context); /* OPENSSL_clear_free: the key schedule is wiped */
    EVP_CIPHER_CTX_free(gcm->evp);
    free(gcm);
}

/* One message through the provider's functions, as EVP_CipherInit_ex, EVP_CipherUpdate,
   EVP_CipherFinal_ex and the tag's EVP_CIPHER_CTX_ctrl would make it. */
static int direct_message(mamfs_gcm *gcm, int encrypt, const unsigned char *nonce,
                          const unsigned char *aad, size_t aad_length,
                          const unsigned char *in, size_t length, unsigned char *out,
                          unsigned char *tag) {
    void *context = gcm->algorithm_context;
    size_t written = 0;
    int ok = encrypt ? provider.encrypt_init(context, NULL, 0, nonce, NONCE_SIZE, NULL)
                     : provider.decrypt_init(context, NULL, 0, nonce, NONCE_SIZE, NULL);
    if (ok != 1)
        return -1;
    if (aad_length > 0 && provider.update(context, NULL, &written, aad_length, aad, aad_length) != 1)
        return -1;
    if (length > 0 && (provider.update(context, out, &written, length, in, length) != 1 || written != length))
        return -1;
    OSSL_PARAM params[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, TAG_SIZE),
        OSSL_PARAM_construct_end(),
    };
    if (encrypt)
        return provider.final(context, NULL, &written, 0) == 1
            && provider.get_ctx_params(context, params) == 1 ? 1 : -1;
    if (provider.set_ctx_params(context, params) != 1)
        return -1;
    return provider.final(context, NULL, &written, 0) == 1 ? 1 : 0;
}

static int evp_message(mamfs_gcm *gcm, int encrypt, const unsigned char *nonce,
                       const unsigned char *aad, size_t aad_length,
                       const unsigned char *in, size_t length, unsigned char *out,
                       unsigned char *tag) {
    EVP_CIPHER_CTX *context = gcm->evp;
    int written = 0;
    if (aad_length > INT_MAX || length > INT_MAX)
        return -1;
    if (EVP_CipherInit_ex(context, NULL, NULL, NULL, nonce, encrypt) != 1)
        return -1;
    if (aad_length > 0 && EVP_CipherUpdate(context, NULL, &written, aad, (int)aad_length) != 1)
        return -1;
    if (length > 0 && (EVP_CipherUpdate(context, out, &written, in, (int)length) != 1 || (size_t)written != length))
        return -1;
    if (encrypt)
        return EVP_CipherFinal_ex(context, NULL, &written) == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, TAG_SIZE, tag) == 1 ? 1 : -1;
    if (EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, TAG_SIZE, tag) != 1)
        return -1;
    return EVP_CipherFinal_ex(context, NULL, &written) == 1 ? 1 : 0;
}

static int message(mamfs_gcm *gcm, int encrypt, const unsigned char *nonce,
                   const unsigned char *aad, size_t aad_length,
                   const unsigned char *in, size_t length, unsigned char *out, unsigned char *tag) {
    if (gcm->algorithm_context != NULL)
        return direct_message(gcm, encrypt, nonce, aad, aad_length, in, length, out, tag);
    return evp_message(gcm, encrypt, nonce, aad, aad_length, in, length, out, tag);
}

int mamfs_gcm_seal(mamfs_gcm *gcm, const unsigned char *nonce,
                   const unsigned char *aad, size_t aad_length,
                   const unsigned char *plaintext, size_t length,
                   unsigned char *ciphertext, unsigned char *tag) {
    return message(gcm, 1, nonce, aad, aad_length, plaintext, length, ciphertext, tag) == 1;
}

int mamfs_gcm_open(mamfs_gcm *gcm, const unsigned char *nonce,
                   const unsigned char *aad, size_t aad_length,
                   const unsigned char *ciphertext, size_t length,
                   unsigned char *plaintext, const unsigned char *tag) {
    unsigned char expected[TAG_SIZE];
    memcpy(expected, tag, TAG_SIZE);
    int result = message(gcm, 0, nonce, aad, aad_length, ciphertext, length, plaintext, expected);
    if (result != 1 && length > 0)
        OPENSSL_cleanse(plaintext, length); /* nothing unverified is left behind */
    return result;
}

/* Seals and opens one message both ways, and an altered one; the direct route is used only
   when it gives EVP's bytes and refuses what EVP refuses. */
static int agrees_with_evp(void) {
    unsigned char key[KEY_SIZE], nonce[NONCE_SIZE], aad[20], text[100];
    unsigned char sealed_direct[sizeof text], sealed_evp[sizeof text], opened[sizeof text];
    unsigned char tag_direct[TAG_SIZE], tag_evp[TAG_SIZE];
    for (size_t i = 0; i < sizeof key; i++) key[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < sizeof nonce; i++) nonce[i] = (unsigned char)(i * 13 + 5);
    for (size_t i = 0; i < sizeof aad; i++) aad[i] = (unsigned char)(i * 3 + 2);
    for (size_t i = 0; i < sizeof text; i++) text[i] = (unsigned char)(i * 31 + 11);
    mamfs_gcm *direct = new_context(key, 1), *evp = new_context(key, 0);
    int agrees = direct != NULL && evp != NULL
        && mamfs_gcm_seal(direct, nonce, aad, sizeof aad, text, sizeof text, sealed_direct, tag_direct)
        && mamfs_gcm_seal(evp, nonce, aad, sizeof aad, text, sizeof text, sealed_evp, tag_evp)
        && memcmp(sealed_direct, sealed_evp, sizeof text) == 0
        && memcmp(tag_direct, tag_evp, TAG_SIZE) == 0
        && mamfs_gcm_open(direct, nonce, aad, sizeof aad, sealed_evp, sizeof text, opened, tag_evp) == 1
        && memcmp(opened, text, sizeof text) == 0;
    if (agrees) {
        sealed_evp[0] ^= 1;
        agrees = mamfs_gcm_open(direct, nonce, aad, sizeof aad, sealed_evp, sizeof text, opened, tag_evp) == 0;
    }
    mamfs_gcm_free(direct);
    mamfs_gcm_free(evp);
    OPENSSL_cleanse(opened, sizeof opened);
    return agrees;
}
