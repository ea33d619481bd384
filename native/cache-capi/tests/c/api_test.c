/*
 * Exercises every function of libslipstream_memcached against a real server.
 *
 *   api_test tcp HOST PORT [HOST2 PORT2]   memcached (or slipstream-cache) over TCP; with a second
 *                                          server, mget spans both
 *   api_test fabric HOST PORT              slipstream-cache over the fabric
 *
 * Prints one line per failed check and exits 1 if any failed.
 */
#include <slipstream/memcached.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    checks++;                                                              \
    if (!(cond)) {                                                         \
      failures++;                                                          \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

#define CHECK_RC(rc, expected)                                                                    \
  do {                                                                                            \
    memcached_return_t rc_ = (rc);                                                                \
    CHECK(rc_ == (expected), "got %d (%s), expected %d (%s)", (int)rc_, memcached_strerror(NULL, rc_), \
          (int)(expected), memcached_strerror(NULL, (expected)));                                 \
  } while (0)

static char *fill(size_t len, int seed) {
  char *v = malloc(len + 1);
  for (size_t i = 0; i < len; i++) v[i] = (char)('a' + (i * 7 + (size_t)seed) % 26);
  v[len] = 0;
  return v;
}

static const char *K(const char *prefix, const char *name) {
  static char buf[8][128];
  static int next = 0;
  char *b = buf[next++ % 8];
  snprintf(b, 128, "%s:%s", prefix, name);
  return b;
}

/* NULL arguments never crash, and are MEMCACHED_INVALID_ARGUMENTS. */
static void null_arguments(memcached_st *memc) {
  memcached_return_t rc = MEMCACHED_SUCCESS;
  CHECK_RC(memcached_set(NULL, "k", 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_set(memc, NULL, 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_set(memc, "k", 1, NULL, 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_add(memc, NULL, 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_replace(memc, NULL, 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_append(memc, NULL, 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_prepend(memc, NULL, 1, "v", 1, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_cas(memc, NULL, 1, "v", 1, 0, 0, 1), MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_get(memc, NULL, 1, NULL, NULL, &rc) == NULL, "get with NULL key");
  CHECK_RC(rc, MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_get(NULL, "k", 1, NULL, NULL, NULL) == NULL, "get with NULL memc and outputs");
  CHECK_RC(memcached_mget(memc, NULL, NULL, 3), MEMCACHED_INVALID_ARGUMENTS);
  const char *keys[] = {"a", NULL};
  size_t lens[] = {1, 1};
  CHECK_RC(memcached_mget(memc, keys, lens, 2), MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_fetch_result(NULL, NULL, &rc) == NULL, "fetch_result NULL memc");
  CHECK_RC(rc, MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_delete(memc, NULL, 1, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_increment(memc, NULL, 1, 1, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_decrement(NULL, "k", 1, 1, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_increment_with_initial(memc, NULL, 1, 1, 1, 0, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_decrement_with_initial(NULL, "k", 1, 1, 1, 0, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_touch(memc, NULL, 1, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_flush(NULL, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_version(NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_server_add(NULL, "127.0.0.1", 1), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_server_add(memc, NULL, 1), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_server_add_fabric(memc, NULL, 1), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_behavior_set(NULL, MEMCACHED_BEHAVIOR_NO_BLOCK, 1), MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_behavior_get(NULL, MEMCACHED_BEHAVIOR_NO_BLOCK) == 0, "behavior_get NULL");
  CHECK_RC(memcached_set_sasl_auth_data(memc, NULL, "p"), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_destroy_sasl_auth_data(NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_server_count(NULL) == 0, "server_count NULL");
  CHECK(memcached_request_create(NULL, NULL, 0, 0) == NULL, "request_create NULL");
  CHECK_RC(memcached_iset(memc, "k", 1, NULL, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_bset(NULL, "k", 1, NULL, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_iget(memc, "k", 1, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_bget(memc, "k", 1, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_wait(memc, NULL), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_test(NULL, NULL), MEMCACHED_INVALID_ARGUMENTS);
  memcached_request_st *req = memcached_request_create(memc, NULL, 0, 0);
  CHECK_RC(memcached_iget(memc, NULL, 1, req), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_iset(NULL, "k", 1, req, 0, 0), MEMCACHED_INVALID_ARGUMENTS);
  memcached_request_free(memc, req);
  memcached_request_free(memc, NULL);
  memcached_request_free(NULL, NULL);
  memcached_result_free(NULL);
  memcached_free(NULL);
  CHECK(memcached_result_value(NULL) == NULL && memcached_result_length(NULL) == 0, "result accessors NULL");
  CHECK(memcached_result_key_value(NULL) == NULL && memcached_result_key_length(NULL) == 0, "result key NULL");
  CHECK(memcached_result_flags(NULL) == 0 && memcached_result_cas(NULL) == 0, "result flags/cas NULL");
  CHECK(memcached_create(memc) == NULL, "memcached_create with caller storage is refused");
}

static void lifecycle_and_behaviors(void) {
  memcached_st *memc = memcached_create(NULL);
  CHECK(memc != NULL, "memcached_create(NULL)");
  CHECK(strcmp(memcached_strerror(memc, MEMCACHED_SUCCESS), "SUCCESS") == 0, "strerror SUCCESS");
  CHECK(strcmp(memcached_strerror(memc, MEMCACHED_NOTFOUND), "NOT FOUND") == 0, "strerror NOTFOUND");
  CHECK(strlen(memcached_strerror(memc, MEMCACHED_IN_PROGRESS)) > 0, "strerror IN_PROGRESS");
  CHECK(strncmp(memcached_lib_version(), "slipstream", 10) == 0, "lib_version %s", memcached_lib_version());
  CHECK(memcached_server_count(memc) == 0, "no servers yet");
  CHECK_RC(memcached_set(memc, "k", 1, "v", 1, 0, 0), MEMCACHED_NO_SERVERS);
  CHECK_RC(memcached_flush(memc, 0), MEMCACHED_NO_SERVERS);
  CHECK_RC(memcached_version(memc), MEMCACHED_NO_SERVERS);

  CHECK(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL) == 1, "binary by default");
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1), MEMCACHED_SUCCESS);
  CHECK(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_NO_BLOCK) == 1, "NO_BLOCK stored");
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA),
           MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION, MEMCACHED_DISTRIBUTION_MODULA),
           MEMCACHED_NOT_SUPPORTED);
  CHECK(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_DISTRIBUTION) == MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA,
        "distribution stays ketama");
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 1000), MEMCACHED_SUCCESS);
  CHECK(memcached_behavior_get(memc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT) == 1000, "connect timeout stored");
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 3000), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, 3000000), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, 3000000), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 1), MEMCACHED_NOT_SUPPORTED);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_NOREPLY, 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_USE_UDP, 1), MEMCACHED_NOT_SUPPORTED);
  CHECK_RC(memcached_behavior_set(memc, (memcached_behavior_t)999, 1), MEMCACHED_INVALID_ARGUMENTS);

  CHECK_RC(memcached_server_add(memc, "no-such-host.invalid", 11211), MEMCACHED_HOST_LOOKUP_FAILURE);
  CHECK_RC(memcached_server_add_fabric(memc, "127.0.0.1", 0), MEMCACHED_INVALID_ARGUMENTS);
  CHECK(memcached_server_count(memc) == 0, "failed adds add nothing");
  memcached_free(memc);
}

/* Every blocking call; `prefix` keeps tests on a shared server apart. */
static void blocking_calls(memcached_st *memc, const char *prefix) {
  memcached_return_t rc;
  size_t len = 0;
  uint32_t flags = 0;
  const char *k = K(prefix, "a");

  CHECK_RC(memcached_set(memc, k, strlen(k), "one", 3, 0, 7), MEMCACHED_SUCCESS);
  char *v = memcached_get(memc, k, strlen(k), &len, &flags, &rc);
  CHECK_RC(rc, MEMCACHED_SUCCESS);
  CHECK(v != NULL && len == 3 && memcmp(v, "one", 3) == 0 && v[3] == 0 && flags == 7, "get after set");
  free(v);
  const char *missing = K(prefix, "missing");
  v = memcached_get(memc, missing, strlen(missing), &len, &flags, &rc);
  CHECK(v == NULL, "miss returns NULL");
  CHECK_RC(rc, MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_set(memc, "", 0, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED);
  char long_key[300];
  memset(long_key, 'k', sizeof long_key);
  CHECK_RC(memcached_set(memc, long_key, 251, "v", 1, 0, 0), MEMCACHED_BAD_KEY_PROVIDED);

  CHECK_RC(memcached_add(memc, k, strlen(k), "x", 1, 0, 0), MEMCACHED_DATA_EXISTS);
  const char *b = K(prefix, "b");
  memcached_delete(memc, b, strlen(b), 0);
  CHECK_RC(memcached_add(memc, b, strlen(b), "bee", 3, 0, 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_replace(memc, missing, strlen(missing), "x", 1, 0, 0), MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_replace(memc, k, strlen(k), "two", 3, 0, 8), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_append(memc, k, strlen(k), "-tail", 5, 0, 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_prepend(memc, k, strlen(k), "head-", 5, 0, 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_append(memc, missing, strlen(missing), "x", 1, 0, 0), MEMCACHED_NOTSTORED);
  v = memcached_get(memc, k, strlen(k), &len, &flags, &rc);
  CHECK(v != NULL && len == 13 && memcmp(v, "head-two-tail", 13) == 0 && flags == 8, "append/prepend: %.*s",
        (int)len, v ? v : "");
  free(v);

  /* cas: read the cas through mget + fetch_result */
  const char *keys[] = {k};
  size_t lens[] = {strlen(k)};
  CHECK_RC(memcached_mget(memc, keys, lens, 1), MEMCACHED_SUCCESS);
  memcached_result_st *r = memcached_fetch_result(memc, NULL, &rc);
  CHECK_RC(rc, MEMCACHED_SUCCESS);
  uint64_t cas = memcached_result_cas(r);
  CHECK(cas != 0, "cas from fetch_result");
  memcached_result_free(r);
  CHECK(memcached_fetch_result(memc, NULL, &rc) == NULL, "one result only");
  CHECK_RC(rc, MEMCACHED_END);
  CHECK_RC(memcached_cas(memc, k, strlen(k), "three", 5, 0, 0, cas), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_cas(memc, k, strlen(k), "four", 4, 0, 0, cas), MEMCACHED_DATA_EXISTS);

  /* delete */
  CHECK_RC(memcached_delete(memc, k, strlen(k), 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_delete(memc, k, strlen(k), 0), MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_delete(memc, b, strlen(b), 10), MEMCACHED_INVALID_ARGUMENTS);

  /* counters */
  const char *c = K(prefix, "counter");
  uint64_t n = 0;
  memcached_delete(memc, c, strlen(c), 0);
  CHECK_RC(memcached_increment(memc, c, strlen(c), 1, &n), MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_increment_with_initial(memc, c, strlen(c), 1, 100, 0, &n), MEMCACHED_SUCCESS);
  CHECK(n == 100, "initial value %llu", (unsigned long long)n);
  CHECK_RC(memcached_increment(memc, c, strlen(c), 5, &n), MEMCACHED_SUCCESS);
  CHECK(n == 105, "incremented %llu", (unsigned long long)n);
  CHECK_RC(memcached_decrement(memc, c, strlen(c), 10, &n), MEMCACHED_SUCCESS);
  CHECK(n == 95, "decremented %llu", (unsigned long long)n);
  CHECK_RC(memcached_decrement(memc, c, strlen(c), 1, NULL), MEMCACHED_SUCCESS); /* NULL output is fine */
  const char *c2 = K(prefix, "counter2");
  memcached_delete(memc, c2, strlen(c2), 0);
  CHECK_RC(memcached_decrement_with_initial(memc, c2, strlen(c2), 1, 7, 0, &n), MEMCACHED_SUCCESS);
  CHECK(n == 7, "decrement initial %llu", (unsigned long long)n);
  const char *c3 = K(prefix, "counter3");
  memcached_delete(memc, c3, strlen(c3), 0);
  CHECK_RC(memcached_increment_with_initial(memc, c3, strlen(c3), 1, 7, MEMCACHED_EXPIRATION_NOT_ADD, &n),
           MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_set(memc, b, strlen(b), "text", 4, 0, 0), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_increment(memc, b, strlen(b), 1, &n), MEMCACHED_CLIENT_ERROR);

  /* touch, version */
  CHECK_RC(memcached_touch(memc, b, strlen(b), 3600), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_touch(memc, missing, strlen(missing), 10), MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_version(memc), MEMCACHED_SUCCESS);
}

/* mget over many keys (spanning every server), fetch_result into a stack result and into
 * allocated ones. */
static void multi_get(memcached_st *memc, const char *prefix) {
  enum { N = 60 };
  static char names[N][64];
  const char *keys[N];
  size_t lens[N];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "%s:m%d", prefix, i);
    keys[i] = names[i];
    lens[i] = strlen(names[i]);
    if (i % 4 == 3) {
      memcached_delete(memc, keys[i], lens[i], 0);
    } else {
      char value[32];
      int vlen = snprintf(value, sizeof value, "value-%d", i);
      CHECK_RC(memcached_set(memc, keys[i], lens[i], value, (size_t)vlen, 0, (uint32_t)i), MEMCACHED_SUCCESS);
    }
  }
  CHECK_RC(memcached_mget(memc, keys, lens, 0), MEMCACHED_NOTFOUND);
  CHECK_RC(memcached_mget(memc, keys, lens, N), MEMCACHED_SUCCESS);
  memcached_result_st stack_result;
  CHECK(memcached_result_create(memc, &stack_result) == &stack_result, "result_create on caller storage");
  int seen[N] = {0};
  int hits = 0;
  memcached_return_t rc;
  for (;;) {
    memcached_result_st *r = (hits % 2 == 0) ? memcached_fetch_result(memc, &stack_result, &rc)
                                             : memcached_fetch_result(memc, NULL, &rc);
    if (r == NULL) break;
    CHECK_RC(rc, MEMCACHED_SUCCESS);
    int index = -1;
    for (int i = 0; i < N; i++) {
      if (memcached_result_key_length(r) == lens[i] && memcmp(memcached_result_key_value(r), keys[i], lens[i]) == 0)
        index = i;
    }
    CHECK(index >= 0 && index % 4 != 3, "unexpected key %.*s", (int)memcached_result_key_length(r),
          memcached_result_key_value(r));
    if (index >= 0) {
      char expected[32];
      int vlen = snprintf(expected, sizeof expected, "value-%d", index);
      CHECK(memcached_result_length(r) == (size_t)vlen && memcmp(memcached_result_value(r), expected, (size_t)vlen) == 0,
            "value of key %d", index);
      CHECK(memcached_result_value(r)[vlen] == 0, "value NUL-terminated");
      CHECK(memcached_result_flags(r) == (uint32_t)index, "flags of key %d", index);
      CHECK(memcached_result_cas(r) != 0, "cas of key %d", index);
      seen[index]++;
    }
    if (r != &stack_result) memcached_result_free(r);
    hits++;
  }
  CHECK_RC(rc, MEMCACHED_END);
  memcached_result_free(&stack_result);
  CHECK(hits == N - N / 4, "hits %d", hits);
  for (int i = 0; i < N; i++) CHECK(seen[i] == (i % 4 == 3 ? 0 : 1), "key %d seen %d times", i, seen[i]);
  memcached_result_st *heap = memcached_result_create(memc, NULL);
  CHECK(heap != NULL && memcached_result_length(heap) == 0, "allocated result");
  memcached_result_free(heap);
}

/* 1 B, 4 KB and 512 KB values through set/get and iset/iget. */
static void sizes(memcached_st *memc, const char *prefix) {
  size_t sizes[] = {1, 4096, 512 * 1024};
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "size%zu", sizes[i]);
    const char *k = K(prefix, name);
    char *value = fill(sizes[i], i);
    CHECK_RC(memcached_set(memc, k, strlen(k), value, sizes[i], 0, 3), MEMCACHED_SUCCESS);
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char *got = memcached_get(memc, k, strlen(k), &len, &flags, &rc);
    CHECK_RC(rc, MEMCACHED_SUCCESS);
    CHECK(got && len == sizes[i] && memcmp(got, value, len) == 0 && flags == 3, "get of %zu bytes", sizes[i]);
    free(got);
    char *value2 = fill(sizes[i], i + 10);
    memcached_request_st *set = memcached_request_create(memc, value2, sizes[i], 0);
    CHECK_RC(memcached_iset(memc, k, strlen(k), set, 0, 4), MEMCACHED_SUCCESS);
    CHECK_RC(memcached_wait(memc, set), MEMCACHED_SUCCESS);
    memcached_request_free(memc, set);
    memcached_request_st *get = memcached_request_create(memc, NULL, 0, 0);
    CHECK_RC(memcached_iget(memc, k, strlen(k), get), MEMCACHED_SUCCESS);
    CHECK_RC(memcached_wait(memc, get), MEMCACHED_SUCCESS);
    CHECK(get->value && get->value_length == sizes[i] && memcmp(get->value, value2, sizes[i]) == 0 && get->flags == 4,
          "iget of %zu bytes", sizes[i]);
    free(get->value);
    memcached_request_free(memc, get);
    free(value);
    free(value2);
  }
}

/* OSU's non-blocking calls: iset/bset/iget/bget, completed by wait and by test. */
static void nonblocking(memcached_st *memc, const char *prefix) {
  enum { N = 100 }; /* more than the 64 in flight per memcached_st */
  static char names[N][64];
  static char values[N][64];
  memcached_request_st *reqs[N];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "%s:nb%d", prefix, i);
    int vlen = snprintf(values[i], sizeof values[i], "nb-value-%d", i * 31);
    reqs[i] = memcached_request_create(memc, values[i], (size_t)vlen, 0);
    CHECK(reqs[i] != NULL, "request_create");
    memcached_return_t rc = (i % 2 == 0) ? memcached_iset(memc, names[i], strlen(names[i]), reqs[i], 0, (uint32_t)i)
                                         : memcached_bset(memc, names[i], strlen(names[i]), reqs[i], 0, (uint32_t)i);
    CHECK_RC(rc, MEMCACHED_SUCCESS);
    CHECK(reqs[i]->response == MEMCACHED_IN_PROGRESS, "in progress after issue");
  }
  /* half by wait, half by test */
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      CHECK_RC(memcached_wait(memc, reqs[i]), MEMCACHED_SUCCESS);
    } else {
      memcached_return_t rc;
      long spins = 0;
      while ((rc = memcached_test(memc, reqs[i])) == MEMCACHED_IN_PROGRESS && spins < 100000000L) spins++;
      CHECK_RC(rc, MEMCACHED_SUCCESS);
    }
    CHECK(reqs[i]->response == MEMCACHED_SUCCESS && reqs[i]->cas != 0, "set %d completed", i);
    CHECK_RC(memcached_wait(memc, reqs[i]), MEMCACHED_SUCCESS); /* completed requests repeat their outcome */
    CHECK_RC(memcached_test(memc, reqs[i]), MEMCACHED_SUCCESS);
  }
  /* gets: into caller buffers (bget) and into malloc'd ones (iget), reusing the requests */
  static char buffers[N][64];
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      reqs[i]->value = NULL;
      CHECK_RC(memcached_iget(memc, names[i], strlen(names[i]), reqs[i]), MEMCACHED_SUCCESS);
    } else {
      reqs[i]->value = buffers[i];
      reqs[i]->value_capacity = sizeof buffers[i];
      CHECK_RC(memcached_bget(memc, names[i], strlen(names[i]), reqs[i]), MEMCACHED_SUCCESS);
    }
  }
  for (int i = N - 1; i >= 0; i--) { /* out of order on purpose */
    memcached_return_t rc;
    if (i % 3 == 0) {
      rc = memcached_wait(memc, reqs[i]);
    } else {
      long spins = 0;
      while ((rc = memcached_test(memc, reqs[i])) == MEMCACHED_IN_PROGRESS && spins < 100000000L) spins++;
    }
    CHECK_RC(rc, MEMCACHED_SUCCESS);
    size_t expected = strlen(values[i]);
    CHECK(reqs[i]->value != NULL && reqs[i]->value_length == expected &&
              memcmp(reqs[i]->value, values[i], expected) == 0 && reqs[i]->value[expected] == 0,
          "get %d: %.*s", i, (int)reqs[i]->value_length, reqs[i]->value ? reqs[i]->value : "");
    CHECK(reqs[i]->flags == (uint32_t)i, "flags of get %d: %u", i, reqs[i]->flags);
    if (i % 2 == 0) {
      free(reqs[i]->value);
    } else {
      CHECK(reqs[i]->value == buffers[i], "bget wrote into the caller's buffer");
    }
    reqs[i]->value = NULL;
  }
  /* a miss; a buffer too small; a request still in flight cannot be reissued; free in flight */
  const char *missing = K(prefix, "nb-missing");
  memcached_delete(memc, missing, strlen(missing), 0);
  CHECK_RC(memcached_iget(memc, missing, strlen(missing), reqs[0]), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_iget(memc, missing, strlen(missing), reqs[0]), MEMCACHED_INVALID_ARGUMENTS);
  CHECK_RC(memcached_wait(memc, reqs[0]), MEMCACHED_NOTFOUND);
  CHECK(reqs[0]->response == MEMCACHED_NOTFOUND, "response after a miss");
  char small[4];
  reqs[1]->value = small;
  reqs[1]->value_capacity = sizeof small;
  CHECK_RC(memcached_bget(memc, names[1], strlen(names[1]), reqs[1]), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_wait(memc, reqs[1]), MEMCACHED_E2BIG);
  CHECK(reqs[1]->value_length == strlen(values[1]), "E2BIG reports the size needed");
  for (int i = 2; i < 12; i++) {
    reqs[i]->value = NULL;
    CHECK_RC(memcached_iget(memc, names[i], strlen(names[i]), reqs[i]), MEMCACHED_SUCCESS);
  }
  for (int i = 0; i < N; i++) memcached_request_free(memc, reqs[i]); /* 2..11 still in flight */
  /* the connection is still in step */
  size_t len;
  memcached_return_t rc;
  char *v = memcached_get(memc, names[5], strlen(names[5]), &len, NULL, &rc);
  CHECK(v && len == strlen(values[5]) && memcmp(v, values[5], len) == 0, "get after abandoned requests");
  free(v);
}

/* SASL against a server without SASL: authentication fails, clearing it recovers. */
static void sasl(memcached_st *memc, const char *prefix) {
  const char *k = K(prefix, "sasl");
  CHECK_RC(memcached_set_sasl_auth_data(memc, "user", "password"), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_set(memc, k, strlen(k), "v", 1, 0, 0), MEMCACHED_AUTH_FAILURE);
  CHECK_RC(memcached_destroy_sasl_auth_data(memc), MEMCACHED_SUCCESS);
  CHECK_RC(memcached_set(memc, k, strlen(k), "v", 1, 0, 0), MEMCACHED_SUCCESS);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s tcp|fabric HOST PORT [HOST2 PORT2]\n", argv[0]);
    return 2;
  }
  int fabric = strcmp(argv[1], "fabric") == 0;
  lifecycle_and_behaviors();
  memcached_st *memc = memcached_create(NULL);
  memcached_return_t rc = fabric ? memcached_server_add_fabric(memc, argv[2], (in_port_t)atoi(argv[3]))
                                 : memcached_server_add(memc, argv[2], (in_port_t)atoi(argv[3]));
  CHECK_RC(rc, MEMCACHED_SUCCESS);
  if (argc >= 6) CHECK_RC(memcached_server_add(memc, argv[4], (in_port_t)atoi(argv[5])), MEMCACHED_SUCCESS);
  CHECK(memcached_server_count(memc) == (argc >= 6 ? 2u : 1u), "server count");
  const char *prefix = fabric ? "c-fabric" : "c-tcp";
  null_arguments(memc);
  blocking_calls(memc, prefix);
  multi_get(memc, prefix);
  sizes(memc, prefix);
  nonblocking(memc, prefix);
  if (!fabric) sasl(memc, prefix);
  CHECK_RC(memcached_flush(memc, 0), MEMCACHED_SUCCESS);
  const char *k = K(prefix, "size1");
  CHECK(memcached_get(memc, k, strlen(k), NULL, NULL, &rc) == NULL && rc == MEMCACHED_NOTFOUND, "flush emptied");
  memcached_free(memc);
  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
