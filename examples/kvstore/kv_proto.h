/* kv_proto.h: what kv_server and kv_client agree on — the hash table's memory
 * layout (which the client reads with RDMA READs), the geometry the server
 * gives in rdma_accept's private data, and the request/response messages
 * (RDMA SENDs, or TCP in --tcp mode).
 *
 * The table is `buckets` slots of `slot_size` bytes each:
 *
 *   offset 0   kv_slot_hdr (32 bytes): version, key_len, val_len, checksum
 *   offset 32  the key   (KV_KEY_MAX bytes, key_len used)
 *   offset 96  the value (value_max bytes, val_len used)
 *   slot_size = 32 + KV_KEY_MAX + value_max, rounded up to 64
 *
 * Every multi-byte field of the table and of the messages is little-endian;
 * the geometry in the private data is big-endian (network order).
 *
 * A slot is a seqlock: the server makes `version` odd, writes the key, the
 * lengths, the value and the checksum, and makes `version` even again. The
 * checksum covers the final (even) version, both lengths, the key and the
 * value, so a reader that sees an even version and a matching checksum has a
 * consistent copy: an RDMA READ is not atomic (it spans packets, and a NIC may
 * read host memory in any order), the checksum is what tells a torn copy. */
#ifndef KV_PROTO_H
#define KV_PROTO_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KV_KEY_MAX 64          /* longest key, bytes */
#define KV_HDR_SIZE 32         /* struct kv_slot_hdr */
#define KV_MAX_PROBE 8         /* linear probing: a key lives in one of 8 slots from its hash */
#define KV_DEFAULT_BUCKETS 4096
#define KV_DEFAULT_VALUE_MAX 4096
#define KV_VALUE_MAX_LIMIT (1u << 20)
#define KV_BUCKETS_LIMIT (1u << 22)
#define KV_RECV_DEPTH 16       /* receives the server keeps posted per client */
#define KV_MAGIC 0x4b565331u   /* "KVS1" */
#define KV_DEFAULT_PORT 18515

struct kv_slot_hdr {
  uint64_t version;   /* odd while the server writes the slot; 0 = never written */
  uint32_t key_len;   /* 0: the slot is empty (keys are never deleted) */
  uint32_t val_len;
  uint64_t checksum;  /* kv_checksum(version, key, value) as written */
  uint64_t reserved;
};

/* Sent by the server in rdma_accept's private data (40 bytes, network order). */
struct kv_geometry {
  uint32_t magic;
  uint32_t rkey;
  uint64_t addr;       /* the table's first byte, as registered */
  uint32_t buckets;
  uint32_t slot_size;
  uint32_t key_max;
  uint32_t value_max;
  uint32_t max_probe;
  uint32_t recv_depth;
};

enum kv_op { KV_OP_PUT = 1, KV_OP_GET = 2 /* GET as a message: --tcp only */ };
enum kv_status { KV_OK = 0, KV_NOT_FOUND = 1, KV_FULL = 2, KV_BAD_REQUEST = 3 };

/* A request: this header, then key_len bytes of key, then val_len of value. */
struct kv_req {
  uint8_t op;
  uint8_t pad;
  uint16_t key_len;
  uint32_t val_len;
  uint64_t id;         /* echoed in the response */
};

/* A response: this header, then (a --tcp GET that found the key) the value. */
struct kv_resp {
  uint8_t op;
  uint8_t status;
  uint16_t pad;
  uint32_t val_len;
  uint64_t id;
  uint64_t version;    /* the slot's version after the PUT / when read */
};

static inline const char* kv_status_str(int s) {
  switch (s) {
    case KV_OK: return "ok";
    case KV_NOT_FOUND: return "not found";
    case KV_FULL: return "no free slot within the probe window (table full around this key)";
    case KV_BAD_REQUEST: return "bad request (key or value length)";
    default: return "unknown status";
  }
}

/* FNV-1a, 64 bits. */
static inline uint64_t kv_fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
#define KV_FNV_INIT 0xcbf29ce484222325ull

static inline uint64_t kv_checksum(uint64_t version, const void* key, uint32_t key_len, const void* val,
                                   uint32_t val_len) {
  unsigned char lens[16];
  uint64_t v = htole64(version);
  uint32_t kl = htole32(key_len), vl = htole32(val_len);
  memcpy(lens, &v, 8);
  memcpy(lens + 8, &kl, 4);
  memcpy(lens + 12, &vl, 4);
  uint64_t h = kv_fnv(KV_FNV_INIT, lens, sizeof lens);
  h = kv_fnv(h, key, key_len);
  return kv_fnv(h, val, val_len);
}

static inline uint32_t kv_bucket_of(const void* key, uint32_t key_len, uint32_t buckets) {
  return (uint32_t)(kv_fnv(KV_FNV_INIT, key, key_len) % buckets);
}

static inline uint32_t kv_slot_size(uint32_t value_max) {
  return (KV_HDR_SIZE + KV_KEY_MAX + value_max + 63u) & ~63u;
}

#endif
