/*
 * libslipstream_memcached: a libmemcached-compatible subset over Slipstream's cache client, plus
 * OSU RDMA-Memcached's non-blocking calls (iset/iget/bset/bget, wait/test).
 *
 * - Names, types and numeric values follow libmemcached 1.0 where a function exists there, so
 *   a program written against that subset compiles and behaves the same. Always the binary
 *   protocol, always consistent hashing (libketama's MD5 ring, 160 points per server).
 * - Servers are reached over TCP (memcached_server_add) or over the fabric
 *   (memcached_server_add_fabric: memcached's binary protocol carried by Slipstream's UCX-based
 *   engine: shared memory on one host, RDMA verbs on clusters).
 * - One memcached_st per thread, as with libmemcached (it is not safe to share without a lock).
 * - Every function accepts NULL pointer arguments and returns MEMCACHED_INVALID_ARGUMENTS (or
 *   NULL with *error set) instead of crashing; output pointers (value_length, flags, error,
 *   value) may be NULL. No Rust panic crosses this interface: an internal failure is
 *   MEMCACHED_FAILURE.
 *
 * Link: -lslipstream_memcached (shared), or libslipstream_memcached.a plus UCX
 * (`pkg-config --libs ucx`), -lpthread -ldl -lm.
 */
#ifndef SLIPSTREAM_MEMCACHED_H
#define SLIPSTREAM_MEMCACHED_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <netinet/in.h> /* in_port_t */

#ifdef __cplusplus
extern "C" {
#endif

#define MEMCACHED_MAX_KEY 251 /* 250 bytes of key and a NUL */
#define MEMCACHED_DEFAULT_PORT 11211
#define MEMCACHED_EXPIRATION_NOT_ADD 0xffffffffU /* incr/decr_with_initial: do not create */

/* libmemcached's values. */
typedef enum memcached_return_t {
  MEMCACHED_SUCCESS = 0,
  MEMCACHED_FAILURE = 1,
  MEMCACHED_HOST_LOOKUP_FAILURE = 2,
  MEMCACHED_CONNECTION_FAILURE = 3,
  MEMCACHED_CONNECTION_BIND_FAILURE = 4,
  MEMCACHED_WRITE_FAILURE = 5,
  MEMCACHED_READ_FAILURE = 6,
  MEMCACHED_UNKNOWN_READ_FAILURE = 7,
  MEMCACHED_PROTOCOL_ERROR = 8,
  MEMCACHED_CLIENT_ERROR = 9,
  MEMCACHED_SERVER_ERROR = 10,
  MEMCACHED_ERROR = 11,
  MEMCACHED_DATA_EXISTS = 12,
  MEMCACHED_DATA_DOES_NOT_EXIST = 13,
  MEMCACHED_NOTSTORED = 14,
  MEMCACHED_STORED = 15,
  MEMCACHED_NOTFOUND = 16,
  MEMCACHED_MEMORY_ALLOCATION_FAILURE = 17,
  MEMCACHED_PARTIAL_READ = 18,
  MEMCACHED_SOME_ERRORS = 19,
  MEMCACHED_NO_SERVERS = 20,
  MEMCACHED_END = 21,
  MEMCACHED_DELETED = 22,
  MEMCACHED_VALUE = 23,
  MEMCACHED_STAT = 24,
  MEMCACHED_ITEM = 25,
  MEMCACHED_ERRNO = 26,
  MEMCACHED_FAIL_UNIX_SOCKET = 27,
  MEMCACHED_NOT_SUPPORTED = 28,
  MEMCACHED_NO_KEY_PROVIDED = 29,
  MEMCACHED_FETCH_NOTFINISHED = 30,
  MEMCACHED_TIMEOUT = 31,
  MEMCACHED_BUFFERED = 32,
  MEMCACHED_BAD_KEY_PROVIDED = 33,
  MEMCACHED_INVALID_HOST_PROTOCOL = 34,
  MEMCACHED_SERVER_MARKED_DEAD = 35,
  MEMCACHED_UNKNOWN_STAT_KEY = 36,
  MEMCACHED_E2BIG = 37,
  MEMCACHED_INVALID_ARGUMENTS = 38,
  MEMCACHED_KEY_TOO_BIG = 39,
  MEMCACHED_AUTH_PROBLEM = 40,
  MEMCACHED_AUTH_FAILURE = 41,
  MEMCACHED_AUTH_CONTINUE = 42,
  MEMCACHED_PARSE_ERROR = 43,
  MEMCACHED_PARSE_USER_ERROR = 44,
  MEMCACHED_DEPRECATED = 45,
  MEMCACHED_IN_PROGRESS = 46,
  MEMCACHED_SERVER_TEMPORARILY_DISABLED = 47,
  MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE = 48,
  MEMCACHED_MAXIMUM_RETURN = 49
} memcached_return_t;
typedef memcached_return_t memcached_return;

#define memcached_success(rc) ((rc) == MEMCACHED_SUCCESS)
#define memcached_failed(rc) ((rc) != MEMCACHED_SUCCESS)

/* libmemcached's values. Applied: CONNECT_TIMEOUT (ms), POLL_TIMEOUT (ms), RCV_TIMEOUT and
 * SND_TIMEOUT (us; all three set the one I/O timeout; 0 keeps the current one). Accepted as what
 * this library always does: NO_BLOCK, TCP_NODELAY (on), BINARY_PROTOCOL (always binary),
 * SUPPORT_CAS, VERIFY_KEY, KETAMA/KETAMA_WEIGHTED/KETAMA_HASH/HASH and DISTRIBUTION set to a
 * consistent (ketama) distribution. Accepted and without effect: SOCKET_SEND_SIZE,
 * SOCKET_RECV_SIZE, CACHE_LOOKUPS, BUFFER_REQUESTS, USER_DATA, SORT_HOSTS, RETRY_TIMEOUT,
 * SERVER_FAILURE_LIMIT, IO_*, HASH_WITH_PREFIX_KEY, CORK, TCP_KEEPALIVE, TCP_KEEPIDLE,
 * AUTO_EJECT_HOSTS, REMOVE_FAILED_SERVERS, DEAD_TIMEOUT, SERVER_TIMEOUT_LIMIT,
 * RANDOMIZE_REPLICA_READ. MEMCACHED_NOT_SUPPORTED: NOREPLY=1, USE_UDP=1, NUMBER_OF_REPLICAS>0,
 * DISTRIBUTION=MODULA/RANDOM/VIRTUAL_BUCKET, LOAD_FROM_FILE. */
typedef enum memcached_behavior_t {
  MEMCACHED_BEHAVIOR_NO_BLOCK = 0,
  MEMCACHED_BEHAVIOR_TCP_NODELAY = 1,
  MEMCACHED_BEHAVIOR_HASH = 2,
  MEMCACHED_BEHAVIOR_KETAMA = 3,
  MEMCACHED_BEHAVIOR_SOCKET_SEND_SIZE = 4,
  MEMCACHED_BEHAVIOR_SOCKET_RECV_SIZE = 5,
  MEMCACHED_BEHAVIOR_CACHE_LOOKUPS = 6,
  MEMCACHED_BEHAVIOR_SUPPORT_CAS = 7,
  MEMCACHED_BEHAVIOR_POLL_TIMEOUT = 8,
  MEMCACHED_BEHAVIOR_DISTRIBUTION = 9,
  MEMCACHED_BEHAVIOR_BUFFER_REQUESTS = 10,
  MEMCACHED_BEHAVIOR_USER_DATA = 11,
  MEMCACHED_BEHAVIOR_SORT_HOSTS = 12,
  MEMCACHED_BEHAVIOR_VERIFY_KEY = 13,
  MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT = 14,
  MEMCACHED_BEHAVIOR_RETRY_TIMEOUT = 15,
  MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED = 16,
  MEMCACHED_BEHAVIOR_KETAMA_HASH = 17,
  MEMCACHED_BEHAVIOR_BINARY_PROTOCOL = 18,
  MEMCACHED_BEHAVIOR_SND_TIMEOUT = 19,
  MEMCACHED_BEHAVIOR_RCV_TIMEOUT = 20,
  MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT = 21,
  MEMCACHED_BEHAVIOR_IO_MSG_WATERMARK = 22,
  MEMCACHED_BEHAVIOR_IO_BYTES_WATERMARK = 23,
  MEMCACHED_BEHAVIOR_IO_KEY_PREFETCH = 24,
  MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY = 25,
  MEMCACHED_BEHAVIOR_NOREPLY = 26,
  MEMCACHED_BEHAVIOR_USE_UDP = 27,
  MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS = 28,
  MEMCACHED_BEHAVIOR_NUMBER_OF_REPLICAS = 29,
  MEMCACHED_BEHAVIOR_RANDOMIZE_REPLICA_READ = 30,
  MEMCACHED_BEHAVIOR_CORK = 31,
  MEMCACHED_BEHAVIOR_TCP_KEEPALIVE = 32,
  MEMCACHED_BEHAVIOR_TCP_KEEPIDLE = 33,
  MEMCACHED_BEHAVIOR_LOAD_FROM_FILE = 34,
  MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS = 35,
  MEMCACHED_BEHAVIOR_DEAD_TIMEOUT = 36,
  MEMCACHED_BEHAVIOR_SERVER_TIMEOUT_LIMIT = 37,
  MEMCACHED_BEHAVIOR_MAX = 38
} memcached_behavior_t;

typedef enum memcached_server_distribution_t {
  MEMCACHED_DISTRIBUTION_MODULA = 0,
  MEMCACHED_DISTRIBUTION_CONSISTENT = 1,
  MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA = 2,
  MEMCACHED_DISTRIBUTION_RANDOM = 3,
  MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY = 4,
  MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED = 5,
  MEMCACHED_DISTRIBUTION_VIRTUAL_BUCKET = 6,
  MEMCACHED_DISTRIBUTION_CONSISTENT_MAX = 7
} memcached_server_distribution_t;

/* A client: its servers, one TCP connection per server, its behaviors. Opaque. */
typedef struct memcached_st memcached_st;

/* One item from memcached_fetch_result. May live on the stack (memcached_result_create(memc,
 * &result)) or be allocated (memcached_result_create(memc, NULL), or memcached_fetch_result with
 * a NULL result); release it with memcached_result_free either way. Read it through the
 * accessors; the fields are private. */
typedef struct memcached_result_st {
  char key_[MEMCACHED_MAX_KEY];
  size_t key_length_;
  char *value_;            /* malloc'd, NUL-terminated, reused across fetches */
  size_t value_length_;
  size_t value_capacity_;
  uint32_t flags_;
  uint64_t cas_;
  int is_allocated_;
  void *reserved_[4];
} memcached_result_st;

/* A non-blocking request (OSU RDMA-Memcached). Create it with memcached_request_create, issue it
 * with memcached_iset/bset/iget/bget, complete it with memcached_wait or poll it with
 * memcached_test, reuse it for another request, release it with memcached_request_free.
 *
 * - iset/bset store value[0..value_length). iset returns at once and value must not change
 *   until the request completes; bset returns once value may be reused.
 * - iget/bget: when the request completes the value is written into `value` if it is not NULL
 *   and holds it (value_capacity bytes; a NUL is added when there is room); a larger value
 *   completes with MEMCACHED_E2BIG and value_length set to the size needed. If `value` is NULL,
 *   the value is returned in a buffer from malloc() (NUL-terminated; the caller frees it, and
 *   sets value back to NULL before reusing the request for another get into a fresh buffer).
 *   iget may read the key until completion; bget returns once the key may be reused.
 * - response is MEMCACHED_IN_PROGRESS while in flight, then the outcome (also returned by
 *   memcached_wait and memcached_test); flags and cas are the item's. */
typedef struct memcached_request_st {
  char *value;
  size_t value_length;
  size_t value_capacity;
  uint32_t flags;
  uint64_t cas;
  memcached_return_t response;
  void *internal_; /* private */
} memcached_request_st;

/* Lifecycle. memcached_create(NULL) only: a memcached_st cannot live in caller memory. */
memcached_st *memcached_create(memcached_st *ptr);
void memcached_free(memcached_st *ptr);
const char *memcached_strerror(const memcached_st *ptr, memcached_return_t rc);
const char *memcached_lib_version(void);

/* Servers. Port 0 means 11211 over TCP; a fabric server needs its port. */
memcached_return_t memcached_server_add(memcached_st *ptr, const char *hostname, in_port_t port);
memcached_return_t memcached_server_add_fabric(memcached_st *ptr, const char *hostname, in_port_t port);
uint32_t memcached_server_count(const memcached_st *ptr);

/* Behaviors (see memcached_behavior_t). */
memcached_return_t memcached_behavior_set(memcached_st *ptr, memcached_behavior_t flag, uint64_t data);
uint64_t memcached_behavior_get(memcached_st *ptr, memcached_behavior_t flag);

/* SASL PLAIN (binary protocol), sent on every new connection. NULL username clears it. */
memcached_return_t memcached_set_sasl_auth_data(memcached_st *ptr, const char *username, const char *password);
memcached_return_t memcached_destroy_sasl_auth_data(memcached_st *ptr);

/* Storage. append/prepend ignore expiration and flags (the binary protocol has no room for
 * them). add on an existing key is MEMCACHED_DATA_EXISTS (binary protocol), as with
 * libmemcached in binary mode. */
memcached_return_t memcached_set(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                 size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_add(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                 size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_replace(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                     size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_append(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                    size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_prepend(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                     size_t value_length, time_t expiration, uint32_t flags);
memcached_return_t memcached_cas(memcached_st *ptr, const char *key, size_t key_length, const char *value,
                                 size_t value_length, time_t expiration, uint32_t flags, uint64_t cas);

/* Retrieval. memcached_get returns a malloc'd, NUL-terminated copy (free() it), or NULL with
 * *error = MEMCACHED_NOTFOUND on a miss. memcached_mget fetches every key at once (one pipelined
 * batch per server); memcached_fetch_result then hands out the hits one by one, and NULL with
 * *error = MEMCACHED_END after the last. */
char *memcached_get(memcached_st *ptr, const char *key, size_t key_length, size_t *value_length, uint32_t *flags,
                    memcached_return_t *error);
memcached_return_t memcached_mget(memcached_st *ptr, const char *const *keys, const size_t *key_length,
                                  size_t number_of_keys);
memcached_result_st *memcached_fetch_result(memcached_st *ptr, memcached_result_st *result,
                                            memcached_return_t *error);

memcached_result_st *memcached_result_create(const memcached_st *ptr, memcached_result_st *result);
void memcached_result_free(memcached_result_st *result);
const char *memcached_result_key_value(const memcached_result_st *self);
size_t memcached_result_key_length(const memcached_result_st *self);
const char *memcached_result_value(const memcached_result_st *self);
size_t memcached_result_length(const memcached_result_st *self);
uint32_t memcached_result_flags(const memcached_result_st *self);
uint64_t memcached_result_cas(const memcached_result_st *self);

/* Deletion, counters, expiry, flush, version. memcached_delete's expiration must be 0. */
memcached_return_t memcached_delete(memcached_st *ptr, const char *key, size_t key_length, time_t expiration);
memcached_return_t memcached_increment(memcached_st *ptr, const char *key, size_t key_length, uint32_t offset,
                                       uint64_t *value);
memcached_return_t memcached_decrement(memcached_st *ptr, const char *key, size_t key_length, uint32_t offset,
                                       uint64_t *value);
memcached_return_t memcached_increment_with_initial(memcached_st *ptr, const char *key, size_t key_length,
                                                    uint64_t offset, uint64_t initial, time_t expiration,
                                                    uint64_t *value);
memcached_return_t memcached_decrement_with_initial(memcached_st *ptr, const char *key, size_t key_length,
                                                    uint64_t offset, uint64_t initial, time_t expiration,
                                                    uint64_t *value);
memcached_return_t memcached_touch(memcached_st *ptr, const char *key, size_t key_length, time_t expiration);
memcached_return_t memcached_flush(memcached_st *ptr, time_t expiration);
memcached_return_t memcached_version(memcached_st *ptr);

/* Non-blocking requests (OSU RDMA-Memcached). At most 64 are on the wire per memcached_st;
 * issuing another first waits for the oldest one's reply (kept for its own wait/test). */
memcached_request_st *memcached_request_create(memcached_st *ptr, char *value, size_t value_length, uint32_t flags);
memcached_return_t memcached_iset(memcached_st *ptr, const char *key, size_t key_length, memcached_request_st *req,
                                  time_t expiration, uint32_t flags);
memcached_return_t memcached_bset(memcached_st *ptr, const char *key, size_t key_length, memcached_request_st *req,
                                  time_t expiration, uint32_t flags);
memcached_return_t memcached_iget(memcached_st *ptr, const char *key, size_t key_length, memcached_request_st *req);
memcached_return_t memcached_bget(memcached_st *ptr, const char *key, size_t key_length, memcached_request_st *req);
memcached_return_t memcached_wait(memcached_st *ptr, memcached_request_st *req);
memcached_return_t memcached_test(memcached_st *ptr, memcached_request_st *req);
/* Abandons the request if still in flight; does not free req->value. Free requests before
 * their memcached_st. */
void memcached_request_free(memcached_st *ptr, memcached_request_st *req);

#ifdef __cplusplus
}
#endif

#endif /* SLIPSTREAM_MEMCACHED_H */
