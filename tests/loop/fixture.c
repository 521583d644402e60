/*
 * The loop tests' shared set-up (fixture.h): loop and guard, the bounded
 * close, free ports, and certificates made with OpenSSL at test time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "fixture.h"

/* ---- loop and guard ------------------------------------------------- */

uint64_t gw_fixture_guard_ms(void)
{
    const char *env = getenv("GW_TEST_GUARD_MS");

    return env != NULL && strtoull(env, NULL, 10) > 0 ? strtoull(env, NULL, 10)
                                                      : GW_FIXTURE_GUARD_MS;
}

static void on_guard(uv_timer_t *timer)
{
    struct gw_fixture *fx = timer->data;

    fx->timed_out = true;
}

void gw_fixture_loop_init(struct gw_fixture *fx)
{
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    assert_int_equal(uv_timer_init(&fx->loop, &fx->guard), 0);
    fx->guard.data = fx;
    gw_fixture_guard_start(fx, gw_fixture_guard_ms());
}

void gw_fixture_guard_start(struct gw_fixture *fx, uint64_t ms)
{
    /* The loop's clock may be a whole slow turn old: count from now. */
    uv_update_time(&fx->loop);
    fx->timed_out = false;
    fx->guard_ms = ms;
    assert_int_equal(uv_timer_start(&fx->guard, on_guard, ms, 0), 0);
}

void gw_loop_run_once(uv_loop_t *loop, const bool *timed_out, const char *what,
                      const char *file, int line)
{
    if (*timed_out) {
        /* What still runs is the best hint of what never came. */
        fprintf(stderr, "loop guard expired waiting for: %s\nactive:\n", what);
        uv_print_active_handles(loop, stderr);
        _fail(file, line);
    }
    uv_run(loop, UV_RUN_ONCE);
}

struct live {
    const uv_handle_t *guard;
    int n;
};

/* What keeps uv_run(UV_RUN_DEFAULT) going, the guard aside. */
static void count_live(uv_handle_t *handle, void *arg)
{
    struct live *l = arg;

    if (handle != l->guard && (uv_is_closing(handle) ||
                               (uv_is_active(handle) && uv_has_ref(handle)))) {
        l->n++;
    }
}

static bool loop_settled(struct gw_fixture *fx)
{
    struct live l = {(const uv_handle_t *)&fx->guard, 0};

    uv_walk(&fx->loop, count_live, &l);
    return l.n == 0 && fx->loop.active_reqs.count == 0;
}

void gw_fixture_loop_close(struct gw_fixture *fx)
{
    /* A test that ran into its guard still gets a whole one to close. */
    gw_fixture_guard_start(fx, gw_fixture_guard_ms());
    GW_FIXTURE_RUN_UNTIL(fx, loop_settled(fx));
    uv_close((uv_handle_t *)&fx->guard, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT); /* only the guard's close is left */
    if (uv_loop_close(&fx->loop) != 0) {
        fprintf(stderr, "handles left open:\n");
        uv_print_all_handles(&fx->loop, stderr);
        fail_msg("uv_loop_close: the test left a handle open");
    }
}

/* ---- ports ------------------------------------------------------------ */

int gw_fixture_free_port(int type)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, type, 0);

    assert_true(fd >= 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- certificates ----------------------------------------------------- */

static void add_ext(X509 *cert, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);

    assert_non_null(ext);
    assert_int_equal(X509_add_ext(cert, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

/* A certificate for key; self-signed when issuer is NULL. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, const char *san,
                       X509 *issuer, EVP_PKEY *issuer_key)
{
    static long serial = 1;
    X509 *cert = X509_new();
    X509V3_CTX ctx;

    assert_non_null(cert);
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(issuer ? issuer : cert));
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer : cert, cert, NULL, NULL, 0);
    add_ext(cert, &ctx, NID_subject_key_identifier, "hash");
    if (san == NULL) {
        add_ext(cert, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(cert, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(cert, &ctx, NID_authority_key_identifier, "keyid:always");
        add_ext(cert, &ctx, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(cert, &ctx, NID_subject_alt_name, san);
    }
    assert_true(X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256()) >
                0);
    return cert;
}

static void write_pem(const char *dir, const char *name, X509 *cert,
                      EVP_PKEY *key)
{
    FILE *fp = fopen(gw_fixture_cert(dir, name), "w");

    assert_non_null(fp);
    if (cert != NULL) {
        assert_int_equal(PEM_write_X509(fp, cert), 1);
    } else {
        assert_int_equal(
            PEM_write_PrivateKey(fp, key, NULL, NULL, 0, NULL, NULL), 1);
    }
    fclose(fp);
}

/* Writes a leaf certificate and its key as <name>.crt and <name>.key. */
static void make_leaf(const char *dir, const char *name, const char *san,
                      X509 *ca, EVP_PKEY *ca_key)
{
    char file[64];
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert;

    assert_non_null(key);
    cert = make_cert(key, name, san, ca, ca_key);
    snprintf(file, sizeof(file), "%s.crt", name);
    write_pem(dir, file, cert, NULL);
    snprintf(file, sizeof(file), "%s.key", name);
    write_pem(dir, file, NULL, key);
    X509_free(cert);
    EVP_PKEY_free(key);
}

static const char *const cert_files[] = {
    "ca.crt",    "good.crt",  "good.key",   "wrong.crt",  "wrong.key",
    "rogue.crt", "rogue.key", "iponly.crt", "iponly.key",
};

void gw_fixture_certs(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *rogue_key = EVP_EC_gen("P-256");
    X509 *ca, *rogue;

    assert_non_null(ca_key);
    assert_non_null(rogue_key);
    /* A short TMPDIR only: the paths must fit gw_fixture_cert()'s. */
    snprintf(dir, cap, "%s/gwtest-XXXXXX",
             tmp != NULL && strlen(tmp) < 40 ? tmp : P_tmpdir);
    assert_non_null(mkdtemp(dir));
    ca = make_cert(ca_key, "hybridgw test CA", NULL, NULL, NULL);
    rogue = make_cert(rogue_key, "unknown CA", NULL, NULL, NULL);
    write_pem(dir, "ca.crt", ca, NULL);
    make_leaf(dir, "good", "DNS:localhost,IP:127.0.0.1", ca, ca_key);
    make_leaf(dir, "wrong", "DNS:wrong.example", ca, ca_key);
    make_leaf(dir, "iponly", "IP:127.0.0.1", ca, ca_key);
    make_leaf(dir, "rogue", "DNS:localhost,IP:127.0.0.1", rogue, rogue_key);
    X509_free(ca);
    X509_free(rogue);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(rogue_key);
}

void gw_fixture_certs_remove(const char *dir)
{
    for (size_t i = 0; i < sizeof(cert_files) / sizeof(cert_files[0]); i++) {
        unlink(gw_fixture_cert(dir, cert_files[i]));
    }
    rmdir(dir);
}

const char *gw_fixture_cert(const char *dir, const char *file)
{
    static char paths[4][128];
    static int next;
    char *p = paths[next++ % 4];

    snprintf(p, sizeof(paths[0]), "%s/%s", dir, file);
    return p;
}

/* ---- running --------------------------------------------------------- */

void gw_fixture_filter(void)
{
    if (getenv("GW_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("GW_TEST_FILTER"));
    }
}
