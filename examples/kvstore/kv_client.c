/* kv_client: the client of the RDMA key-value store (libibverbs and librdmacm
 * only; see README.md).
 *
 * GET is one-sided: an RDMA READ of the key's slot (header, key and the first
 * --read-hint bytes of the value), and a second READ of the whole slot when
 * the value turns out longer than that. A copy is accepted only when the
 * slot's version is even, the same in both READs, and the checksum over
 * version, key and value matches; anything else is a torn read, counted and
 * read again. PUT is a SEND to the server, which answers with a SEND once the
 * slot is written. One operation is in flight at a time.
 *
 * Modes: the load generator (default), --check (every GET must return the
 * last PUT's value), --torn write|read (one client rewrites a key with all-'A'
 * and all-'B' values, another reads it and must never see a mix). --tcp runs
 * the same over a TCP socket to `kv_server --tcp`. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kv_proto.h"
#include "kv_util.h"

const char* kv_prog = "kv_client";

static const char* usage_text =
    "usage: kv_client [options] SERVER\n"
    "  -p, --port PORT        server's rdma_cm (or --tcp: TCP) port (default 18515)\n"
    "      --tcp              talk to `kv_server --tcp` over TCP instead of RDMA\n"
    "  load generator (default):\n"
    "  -n, --ops N            operations to time (default 10000)\n"
    "      --get-ratio R      fraction of GETs, 0..1 (default 0.9)\n"
    "      --keys K           distinct keys, all PUT once before the timed run (default 1000)\n"
    "      --value-size B     value bytes (default 64; --torn: 4000)\n"
    "  --check                random PUTs and GETs over --keys keys (-n operations); every GET must\n"
    "                         return the last PUT's value. Exit 1 on any mismatch\n"
    "  --torn write|read      write: PUT one key with all-'A' and all-'B' values in turn, for\n"
    "                         --seconds (or -n PUTs); read: -n GETs of that key, exit 1 if any\n"
    "                         returns a mix\n"
    "  other:\n"
    "      --key-prefix P     key names are P followed by a number (default 'k'; --check: 'c<pid>-')\n"
    "      --seconds S        --torn write: how long (default 10)\n"
    "      --read-hint B      value bytes the first READ of a GET fetches (default --value-size)\n"
    "      --seed S           PRNG seed (default 1)\n"
    "      --timeout-ms T     longest wait for any one operation or connection step (default 10000)\n"
    "      --ack-timeout E    RC local ACK timeout exponent, 4.096 us * 2^E (default 14: 67 ms)\n";

enum mode { MODE_LOAD, MODE_CHECK, MODE_TORN_WRITE, MODE_TORN_READ };

static struct {
  const char* server;
  uint16_t port;
  bool tcp;
  enum mode mode;
  uint64_t ops;
  bool ops_given;
  double get_ratio;
  uint32_t keys;
  uint32_t value_size;
  bool value_size_given;
  const char* key_prefix;
  double seconds;
  uint32_t read_hint;
  bool read_hint_given;
  uint64_t seed;
  unsigned timeout_ms;
  uint8_t ack_timeout;
} opt = {NULL, KV_DEFAULT_PORT, false, MODE_LOAD, 10000, false, 0.9, 1000, 64, false, NULL, 10, 0, false,
         1,    10000,           14};

/* Torn reads seen (and read again), by what gave them away. */
static struct {
  uint64_t odd, changed, checksum;
} torn;
static uint64_t torn_total(void) { return torn.odd + torn.changed + torn.checksum; }

static uint64_t rng_state;
static uint64_t rng_next(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- RDMA ---- */

#define RESP_DEPTH 4

static struct rdma_event_channel* cm_ch;
static struct rdma_cm_id* id;
static struct ibv_pd* pd;
static struct ibv_cq* cq;
static struct ibv_mr *read_mr, *req_mr, *resp_mr;
static unsigned char *read_buf, *req_buf;
static struct kv_resp resp_buf[RESP_DEPTH];
static struct {
  uint64_t addr;
  uint32_t rkey, buckets, slot_size, key_max, value_max, max_probe, recv_depth;
} geo;
static size_t msg_size;
static uint64_t next_req_id = 1;
static unsigned outstanding; /* signaled SENDs and READs not completed yet */
static bool have_reply;
static struct kv_resp reply;

enum { WR_RECV = 1, WR_SEND = 2, WR_READ = 3 };

static const char* cm_event_name(struct rdma_cm_event* ev) { return rdma_event_str(ev->event); }

/* Waits (bounded) for the event `want` on our id; any other is fatal. */
static void expect_cm_event(enum rdma_cm_event_type want, const char* step, struct rdma_cm_event** out) {
  struct rdma_cm_event* ev;
  if (kv_next_cm_event(cm_ch, (int)opt.timeout_ms, &ev))
    kv_die("%s: no rdma_cm event within %u ms (%s)", step, opt.timeout_ms, strerror(errno));
  if (ev->event != want) {
    char why[200] = "";
    if (ev->event == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data_len && ev->param.conn.private_data) {
      const char* pd_text = ev->param.conn.private_data;
      size_t n = strnlen(pd_text, ev->param.conn.private_data_len);
      if (n && n < ev->param.conn.private_data_len) snprintf(why, sizeof why, ": the server says \"%s\"", pd_text);
    }
    kv_die("%s: got %s (status %d) instead of %s%s%s", step, cm_event_name(ev), ev->status, rdma_event_str(want),
           why, ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8 ? " (nobody listens on that port)" : "");
  }
  if (out)
    *out = ev;
  else
    rdma_ack_cm_event(ev);
}

static void post_resp_recv(unsigned i) {
  struct ibv_sge sge = {(uintptr_t)&resp_buf[i], sizeof resp_buf[i], resp_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = ((uint64_t)WR_RECV << 32) | i, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(id->qp, &wr, &bad)) kv_die("ibv_post_recv: %s", strerror(errno));
}

static const char* wr_kind(uint64_t wr_id) {
  switch (wr_id >> 32) {
    case WR_RECV: return "receive (PUT reply)";
    case WR_SEND: return "SEND (PUT)";
    case WR_READ: return "RDMA READ (GET)";
    default: return "work request";
  }
}

/* Polls until nothing we posted is outstanding and, if want_reply, a PUT
 * reply has arrived; at most --timeout-ms. A failed completion is fatal. */
static void cq_wait(bool want_reply) {
  uint64_t deadline = kv_now_ns() + (uint64_t)opt.timeout_ms * 1000000ull;
  unsigned idle = 0;
  while (outstanding || (want_reply && !have_reply)) {
    struct ibv_wc wc[8];
    int n = ibv_poll_cq(cq, 8, wc);
    if (n < 0) kv_die("ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS)
        kv_die("%s completed with error: %s (status %d, vendor error 0x%x)", wr_kind(wc[i].wr_id),
               ibv_wc_status_str(wc[i].status), wc[i].status, wc[i].vendor_err);
      if ((wc[i].wr_id >> 32) == WR_RECV) {
        unsigned slot = (unsigned)(wc[i].wr_id & 0xffffffffu);
        if (wc[i].byte_len < sizeof reply) kv_die("short reply from the server (%u bytes)", wc[i].byte_len);
        reply = resp_buf[slot];
        have_reply = true;
        post_resp_recv(slot);
      } else {
        --outstanding;
      }
    }
    if (n == 0 && (++idle & 1023) == 0 && kv_now_ns() > deadline)
      kv_die("no completion within %u ms (%u work requests outstanding%s): is the server still there?",
             opt.timeout_ms, outstanding, want_reply && !have_reply ? ", PUT reply missing" : "");
  }
}

static void rdma_read(uint64_t raddr, uint32_t len) {
  struct ibv_sge sge = {(uintptr_t)read_buf, len, read_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = (uint64_t)WR_READ << 32,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_READ,
                           .send_flags = IBV_SEND_SIGNALED,
                           .wr.rdma = {.remote_addr = raddr, .rkey = geo.rkey}},
                     *bad;
  if (ibv_post_send(id->qp, &wr, &bad)) kv_die("ibv_post_send(RDMA READ): %s", strerror(errno));
  ++outstanding;
  cq_wait(false);
}

static void rdma_connect_server(void) {
  if (!(cm_ch = rdma_create_event_channel()))
    kv_die("rdma_create_event_channel: %s (no RDMA device? under rocelab: `rocelab run -- kv_client ...`)",
           strerror(errno));
  int fl = fcntl(cm_ch->fd, F_GETFL);
  if (fl < 0 || fcntl(cm_ch->fd, F_SETFL, fl | O_NONBLOCK)) kv_die("fcntl: %s", strerror(errno));
  if (rdma_create_id(cm_ch, &id, NULL, RDMA_PS_TCP)) kv_die("rdma_create_id: %s", strerror(errno));
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
  char ps[8];
  snprintf(ps, sizeof ps, "%u", opt.port);
  int rc = getaddrinfo(opt.server, ps, &hints, &res);
  if (rc) kv_die("server address %s: %s", opt.server, gai_strerror(rc));
  if (rdma_resolve_addr(id, NULL, res->ai_addr, (int)opt.timeout_ms))
    kv_die("rdma_resolve_addr(%s): %s", opt.server, strerror(errno));
  freeaddrinfo(res);
  expect_cm_event(RDMA_CM_EVENT_ADDR_RESOLVED, "resolving the server's address", NULL);
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &opt.ack_timeout, sizeof opt.ack_timeout))
    fprintf(stderr, "kv_client: note: rdma_set_option(ACK_TIMEOUT): %s; keeping the default\n", strerror(errno));
  if (rdma_resolve_route(id, (int)opt.timeout_ms)) kv_die("rdma_resolve_route: %s", strerror(errno));
  expect_cm_event(RDMA_CM_EVENT_ROUTE_RESOLVED, "resolving the route", NULL);

  if (!(pd = ibv_alloc_pd(id->verbs))) kv_die("ibv_alloc_pd: %s", strerror(errno));
  if (!(cq = ibv_create_cq(id->verbs, 32, NULL, NULL, 0))) kv_die("ibv_create_cq: %s", strerror(errno));
  struct ibv_qp_init_attr qa = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 8, .max_recv_wr = RESP_DEPTH, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
      .sq_sig_all = 0,
  };
  if (rdma_create_qp(id, pd, &qa)) kv_die("rdma_create_qp: %s", strerror(errno));
  if (!(resp_mr = ibv_reg_mr(pd, resp_buf, sizeof resp_buf, IBV_ACCESS_LOCAL_WRITE)))
    kv_die("ibv_reg_mr: %s", strerror(errno));
  for (unsigned i = 0; i < RESP_DEPTH; ++i) post_resp_recv(i);

  struct rdma_conn_param p = {.initiator_depth = 1, .responder_resources = 0, .retry_count = 7, .rnr_retry_count = 7};
  if (rdma_connect(id, &p)) kv_die("rdma_connect: %s", strerror(errno));
  struct rdma_cm_event* ev;
  expect_cm_event(RDMA_CM_EVENT_ESTABLISHED, "connecting", &ev);
  struct kv_geometry g;
  if (!ev->param.conn.private_data || ev->param.conn.private_data_len < sizeof g)
    kv_die("the server's accept carries no table geometry (%u bytes of private data): not a kv_server?",
           ev->param.conn.private_data_len);
  memcpy(&g, ev->param.conn.private_data, sizeof g);
  rdma_ack_cm_event(ev);
  if (ntohl(g.magic) != KV_MAGIC) kv_die("the server's private data is not a kv_server's (magic 0x%08x)", ntohl(g.magic));
  geo.addr = be64toh(g.addr);
  geo.rkey = ntohl(g.rkey);
  geo.buckets = ntohl(g.buckets);
  geo.slot_size = ntohl(g.slot_size);
  geo.key_max = ntohl(g.key_max);
  geo.value_max = ntohl(g.value_max);
  geo.max_probe = ntohl(g.max_probe);
  geo.recv_depth = ntohl(g.recv_depth);
  if (geo.key_max != KV_KEY_MAX || geo.slot_size < kv_slot_size(geo.value_max) || !geo.buckets || !geo.max_probe)
    kv_die("the server's table geometry makes no sense (key_max %u, slot %u, value_max %u, buckets %u)", geo.key_max,
           geo.slot_size, geo.value_max, geo.buckets);
  if (opt.value_size > geo.value_max)
    kv_die("--value-size %u is larger than the server's largest value (%u)", opt.value_size, geo.value_max);
  msg_size = sizeof(struct kv_req) + KV_KEY_MAX + geo.value_max;
  read_buf = aligned_alloc(64, geo.slot_size);
  req_buf = aligned_alloc(64, (msg_size + 63) & ~(size_t)63);
  if (!read_buf || !req_buf) kv_die("out of memory");
  if (!(read_mr = ibv_reg_mr(pd, read_buf, geo.slot_size, IBV_ACCESS_LOCAL_WRITE)) ||
      !(req_mr = ibv_reg_mr(pd, req_buf, msg_size, 0)))
    kv_die("ibv_reg_mr: %s", strerror(errno));
  printf("kv_client: connected to %s port %u: table at 0x%" PRIx64 " rkey 0x%x, %u slots x %u bytes, value <= %u\n",
         opt.server, opt.port, geo.addr, geo.rkey, geo.buckets, geo.slot_size, geo.value_max);
  fflush(stdout);
}

static void rdma_close(void) {
  if (!id) return;
  if (rdma_disconnect(id) == 0) {
    struct rdma_cm_event* ev;
    /* Bounded: a server gone for good answers nothing. Longer than one DREQ
     * retransmission (rdma_cm's response timeout, 4.3 s, plus twice the
     * packet lifetime: 6.4 s), so that a lost DREQ is sent again before the
     * id is destroyed and its retries with it. */
    if (kv_next_cm_event(cm_ch, 10000, &ev) == 0) rdma_ack_cm_event(ev);
  }
  rdma_destroy_qp(id);
  ibv_dereg_mr(read_mr);
  ibv_dereg_mr(req_mr);
  ibv_dereg_mr(resp_mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(cm_ch);
  free(read_buf);
  free(req_buf);
}

static int rdma_put(const unsigned char* key, uint32_t klen, const unsigned char* val, uint32_t vlen) {
  struct kv_req rq = {.op = KV_OP_PUT, .key_len = htole16((uint16_t)klen), .val_len = htole32(vlen),
                      .id = htole64(next_req_id++)};
  memcpy(req_buf, &rq, sizeof rq);
  memcpy(req_buf + sizeof rq, key, klen);
  memcpy(req_buf + sizeof rq + klen, val, vlen);
  struct ibv_sge sge = {(uintptr_t)req_buf, (uint32_t)(sizeof rq + klen + vlen), req_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = (uint64_t)WR_SEND << 32,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  have_reply = false;
  if (ibv_post_send(id->qp, &wr, &bad)) kv_die("ibv_post_send(SEND): %s", strerror(errno));
  ++outstanding;
  cq_wait(true);
  if (reply.id != rq.id)
    kv_die("PUT reply for request %" PRIu64 ", expected %" PRIu64, le64toh(reply.id), le64toh(rq.id));
  return reply.status;
}

/* GET by RDMA READ: see the top of the file. */
static int rdma_get(const unsigned char* key, uint32_t klen, unsigned char* out, uint32_t* out_len) {
  uint32_t b = kv_bucket_of(key, klen, geo.buckets);
  uint64_t deadline = kv_now_ns() + (uint64_t)opt.timeout_ms * 1000000ull;
  uint32_t hint = opt.read_hint < geo.value_max ? opt.read_hint : geo.value_max;
  for (uint32_t p = 0; p < geo.max_probe && p < geo.buckets;) {
    uint64_t raddr = geo.addr + (uint64_t)((b + p) % geo.buckets) * geo.slot_size;
    uint32_t first = KV_HDR_SIZE + KV_KEY_MAX + hint;
    rdma_read(raddr, first);
    struct kv_slot_hdr h;
    memcpy(&h, read_buf, sizeof h);
    uint64_t v1 = le64toh(h.version);
    uint32_t kl = le32toh(h.key_len), vl = le32toh(h.val_len);
    uint64_t* torn_kind = NULL;
    if (v1 & 1) {
      torn_kind = &torn.odd;
    } else if (kl == 0 && v1 == 0) {
      return KV_NOT_FOUND; /* never written: the key is nowhere further */
    } else if (kl == 0 || kl > KV_KEY_MAX || vl > geo.value_max) {
      torn_kind = &torn.checksum; /* lengths no writer wrote: a torn header */
    } else {
      uint32_t need = KV_HDR_SIZE + KV_KEY_MAX + vl;
      if (need > first) {
        rdma_read(raddr, need);
        memcpy(&h, read_buf, sizeof h);
        if (le64toh(h.version) != v1) torn_kind = &torn.changed;
      }
      if (!torn_kind) {
        const unsigned char* k = read_buf + KV_HDR_SIZE;
        uint64_t sum = kv_checksum(v1, k, kl, k + KV_KEY_MAX, vl);
        if (sum != le64toh(h.checksum) || le32toh(h.key_len) != kl || le32toh(h.val_len) != vl)
          torn_kind = &torn.checksum;
      }
    }
    if (torn_kind) {
      ++*torn_kind;
      if (kv_now_ns() > deadline)
        kv_die("GET gave up after %u ms of torn reads (%" PRIu64 " so far)", opt.timeout_ms, torn_total());
      continue; /* the same slot again */
    }
    if (kl == klen && memcmp(read_buf + KV_HDR_SIZE, key, klen) == 0) {
      memcpy(out, read_buf + KV_HDR_SIZE + KV_KEY_MAX, vl);
      *out_len = vl;
      return KV_OK;
    }
    ++p;
  }
  return KV_NOT_FOUND;
}

/* ---- TCP ---- */

static int tcp_fd = -1;

static void tcp_connect_server(void) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
  char ps[8];
  snprintf(ps, sizeof ps, "%u", opt.port);
  int rc = getaddrinfo(opt.server, ps, &hints, &res);
  if (rc) kv_die("server address %s: %s", opt.server, gai_strerror(rc));
  tcp_fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (tcp_fd < 0) kv_die("socket: %s", strerror(errno));
  /* connect() bounded by --timeout-ms, then every send/recv too. */
  struct timeval tv = {opt.timeout_ms / 1000, (opt.timeout_ms % 1000) * 1000};
  setsockopt(tcp_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(tcp_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(tcp_fd, res->ai_addr, res->ai_addrlen))
    kv_die("TCP connect to %s port %u: %s", opt.server, opt.port, strerror(errno));
  freeaddrinfo(res);
  int one = 1;
  setsockopt(tcp_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  msg_size = sizeof(struct kv_req) + KV_KEY_MAX + opt.value_size;
  if (!(req_buf = malloc(msg_size))) kv_die("out of memory");
  printf("kv_client: connected to %s port %u (tcp)\n", opt.server, opt.port);
  fflush(stdout);
}

static void tcp_io(void* p, size_t n, bool out) {
  unsigned char* b = p;
  while (n) {
    ssize_t r = out ? send(tcp_fd, b, n, MSG_NOSIGNAL) : recv(tcp_fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      kv_die("TCP %s: nothing for %u ms: is the server still there?", out ? "send" : "receive", opt.timeout_ms);
    if (r <= 0) kv_die("TCP %s: %s", out ? "send" : "receive", r ? strerror(errno) : "the server closed the connection");
    b += r;
    n -= (size_t)r;
  }
}

static int tcp_request(uint8_t op, const unsigned char* key, uint32_t klen, const unsigned char* val, uint32_t vlen,
                       unsigned char* out, uint32_t* out_len) {
  struct kv_req rq = {.op = op, .key_len = htole16((uint16_t)klen), .val_len = htole32(vlen),
                      .id = htole64(next_req_id++)};
  memcpy(req_buf, &rq, sizeof rq);
  memcpy(req_buf + sizeof rq, key, klen);
  if (vlen) memcpy(req_buf + sizeof rq + klen, val, vlen);
  tcp_io(req_buf, sizeof rq + klen + vlen, true);
  struct kv_resp r;
  tcp_io(&r, sizeof r, false);
  if (r.id != rq.id) kv_die("TCP reply for request %" PRIu64 ", expected %" PRIu64, le64toh(r.id), le64toh(rq.id));
  if (op == KV_OP_GET && r.status == KV_OK) {
    uint32_t n = le32toh(r.val_len);
    if (n > KV_VALUE_MAX_LIMIT) kv_die("TCP GET reply of %u bytes: more than a value can be", n);
    tcp_io(out, n, false);
    *out_len = n;
  }
  return r.status;
}

/* ---- the operations, whichever transport ---- */

static int kv_put(const char* key, const unsigned char* val, uint32_t vlen) {
  uint32_t klen = (uint32_t)strlen(key);
  return opt.tcp ? tcp_request(KV_OP_PUT, (const unsigned char*)key, klen, val, vlen, NULL, NULL)
                 : rdma_put((const unsigned char*)key, klen, val, vlen);
}

static int kv_get(const char* key, unsigned char* out, uint32_t* out_len) {
  uint32_t klen = (uint32_t)strlen(key);
  return opt.tcp ? tcp_request(KV_OP_GET, (const unsigned char*)key, klen, NULL, 0, out, out_len)
                 : rdma_get((const unsigned char*)key, klen, out, out_len);
}

static void key_name(char* buf, uint32_t i) { snprintf(buf, KV_KEY_MAX + 1, "%s%08u", opt.key_prefix, i); }

static void put_or_die(const char* key, const unsigned char* val, uint32_t vlen) {
  int s = kv_put(key, val, vlen);
  if (s != KV_OK) kv_die("PUT %s: %s", key, kv_status_str(s));
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[n], in microseconds. */
static double pct_us(const uint64_t* v, uint64_t n, double q) {
  uint64_t rank = (uint64_t)(q * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return (double)v[rank - 1] / 1000.0;
}

static int run_load(void) {
  char key[KV_KEY_MAX + 1];
  unsigned char* val = malloc(opt.value_size ? opt.value_size : 1);
  unsigned char* got = malloc(KV_VALUE_MAX_LIMIT);
  uint64_t* lat = malloc(opt.ops * sizeof *lat);
  if (!val || !got || !lat) kv_die("out of memory");
  memset(val, 'v', opt.value_size);
  for (uint32_t i = 0; i < opt.keys; ++i) {
    key_name(key, i);
    put_or_die(key, val, opt.value_size);
  }
  uint64_t gets = 0, puts = 0, errors = 0;
  uint64_t t0 = kv_now_ns();
  for (uint64_t i = 0; i < opt.ops; ++i) {
    key_name(key, (uint32_t)(rng_next() % opt.keys));
    bool get = (double)(rng_next() >> 11) / 9007199254740992.0 < opt.get_ratio;
    uint64_t s = kv_now_ns();
    if (get) {
      uint32_t n = 0;
      int st = kv_get(key, got, &n);
      if (st != KV_OK || n != opt.value_size) {
        if (errors++ < 5) fprintf(stderr, "kv_client: GET %s: %s, %u bytes\n", key, kv_status_str(st), n);
      }
      ++gets;
    } else {
      val[0] = (unsigned char)('a' + i % 26);
      int st = kv_put(key, val, opt.value_size);
      if (st != KV_OK && errors++ < 5) fprintf(stderr, "kv_client: PUT %s: %s\n", key, kv_status_str(st));
      ++puts;
    }
    lat[i] = kv_now_ns() - s;
  }
  double secs = (double)(kv_now_ns() - t0) / 1e9;
  qsort(lat, opt.ops, sizeof *lat, cmp_u64);
  printf("kv_client: result mode=%s ops=%" PRIu64 " gets=%" PRIu64 " puts=%" PRIu64
         " keys=%u value_size=%u secs=%.3f ops_per_sec=%.0f"
         " p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f torn_retries=%" PRIu64 " errors=%" PRIu64 "\n",
         opt.tcp ? "tcp" : "rdma", opt.ops, gets, puts, opt.keys, opt.value_size, secs, (double)opt.ops / secs,
         pct_us(lat, opt.ops, 0.50), pct_us(lat, opt.ops, 0.90), pct_us(lat, opt.ops, 0.99),
         pct_us(lat, opt.ops, 0.999), torn_total(), errors);
  free(val);
  free(got);
  free(lat);
  return errors ? 1 : 0;
}

/* The value --check PUTs as the seq-th version of key k: its length and bytes
 * follow from (seed, k, seq), so a GET can be judged without keeping values. */
static uint32_t check_value(uint32_t k, uint32_t seq, unsigned char* out) {
  uint64_t s = opt.seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)k << 32 | seq);
  uint32_t len = 1 + (uint32_t)((s * 0xff51afd7ed558ccdull) >> 40) % opt.value_size;
  for (uint32_t i = 0; i < len; ++i) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ull;
    out[i] = (unsigned char)(z >> 56);
  }
  return len;
}

static int run_check(void) {
  uint32_t* seq = calloc(opt.keys, sizeof *seq); /* the last PUT of each key; 0: none yet */
  unsigned char* want = malloc(opt.value_size);
  unsigned char* got = malloc(KV_VALUE_MAX_LIMIT);
  if (!seq || !want || !got) kv_die("out of memory");
  char key[KV_KEY_MAX + 1];
  uint64_t puts = 0, gets = 0, found = 0, not_found = 0, mismatches = 0;
  for (uint64_t i = 0; i < opt.ops; ++i) {
    uint32_t k = (uint32_t)(rng_next() % opt.keys);
    key_name(key, k);
    if (rng_next() & 1) {
      uint32_t len = check_value(k, ++seq[k], want);
      put_or_die(key, want, len);
      ++puts;
      continue;
    }
    uint32_t n = 0;
    int st = kv_get(key, got, &n);
    ++gets;
    if (st == KV_OK) ++found;
    if (st == KV_NOT_FOUND) ++not_found;
    bool ok;
    if (seq[k] == 0) {
      ok = st == KV_NOT_FOUND;
    } else {
      uint32_t len = check_value(k, seq[k], want);
      ok = st == KV_OK && n == len && memcmp(got, want, len) == 0;
    }
    if (!ok && mismatches++ < 10) {
      /* Which PUT did it return, if any? */
      int which = -1;
      for (uint32_t s = 1; st == KV_OK && s < seq[k] && which < 0; ++s) {
        uint32_t len = check_value(k, s, want);
        if (n == len && memcmp(got, want, len) == 0) which = (int)s;
      }
      fprintf(stderr, "kv_client: MISMATCH op %" PRIu64 ": GET %s after PUT #%u: got %s, %u bytes%s", i, key, seq[k],
              kv_status_str(st), n, which > 0 ? "" : "\n");
      if (which > 0) fprintf(stderr, " = the value of PUT #%d\n", which);
    }
  }
  printf("kv_client: check mode=%s ops=%" PRIu64 " puts=%" PRIu64 " gets=%" PRIu64 " found=%" PRIu64
         " not_found=%" PRIu64 " mismatches=%" PRIu64 " torn_retries=%" PRIu64 " -> %s\n",
         opt.tcp ? "tcp" : "rdma", opt.ops, puts, gets, found, not_found, mismatches, torn_total(),
         mismatches ? "FAIL" : "PASS");
  free(seq);
  free(want);
  free(got);
  return mismatches ? 1 : 0;
}

static const char* torn_key(void) {
  static char k[KV_KEY_MAX + 1];
  snprintf(k, sizeof k, "%storn", opt.key_prefix);
  return k;
}

static int run_torn_write(void) {
  unsigned char* a = malloc(opt.value_size);
  unsigned char* b = malloc(opt.value_size);
  if (!a || !b) kv_die("out of memory");
  memset(a, 'A', opt.value_size);
  memset(b, 'B', opt.value_size);
  uint64_t t0 = kv_now_ns(), end = t0 + (uint64_t)(opt.seconds * 1e9), puts = 0;
  while (opt.ops_given ? puts < opt.ops : kv_now_ns() < end) {
    put_or_die(torn_key(), puts & 1 ? b : a, opt.value_size);
    ++puts;
  }
  printf("kv_client: torn-writer mode=%s puts=%" PRIu64 " value_size=%u secs=%.1f\n", opt.tcp ? "tcp" : "rdma", puts,
         opt.value_size, (double)(kv_now_ns() - t0) / 1e9);
  free(a);
  free(b);
  return 0;
}

static int run_torn_read(void) {
  unsigned char* got = malloc(KV_VALUE_MAX_LIMIT);
  if (!got) kv_die("out of memory");
  uint32_t n = 0;
  /* The writer may not have written yet: wait (bounded) for the key. */
  uint64_t deadline = kv_now_ns() + (uint64_t)opt.timeout_ms * 1000000ull;
  while (kv_get(torn_key(), got, &n) == KV_NOT_FOUND) {
    if (kv_now_ns() > deadline) kv_die("key %s never appeared (no writer?)", torn_key());
    usleep(10000);
  }
  uint64_t all_a = 0, all_b = 0, mixed = 0, not_found = 0;
  for (uint64_t i = 0; i < opt.ops; ++i) {
    int st = kv_get(torn_key(), got, &n);
    if (st != KV_OK) {
      ++not_found;
      continue;
    }
    uint32_t as = 0, bs = 0;
    for (uint32_t j = 0; j < n; ++j) {
      as += got[j] == 'A';
      bs += got[j] == 'B';
    }
    if (n && as == n)
      ++all_a;
    else if (n && bs == n)
      ++all_b;
    else if (mixed++ < 5)
      fprintf(stderr, "kv_client: MIXED value in GET %" PRIu64 ": %u bytes, %u 'A', %u 'B', %u other\n", i, n, as, bs,
              n - as - bs);
  }
  printf("kv_client: torn-reader mode=%s gets=%" PRIu64 " all_A=%" PRIu64 " all_B=%" PRIu64 " mixed=%" PRIu64
         " torn_detected=%" PRIu64 " (odd_version=%" PRIu64 " changed=%" PRIu64 " checksum=%" PRIu64 ") -> %s\n",
         opt.tcp ? "tcp" : "rdma", opt.ops, all_a, all_b, mixed, torn_total(), torn.odd, torn.changed, torn.checksum,
         mixed || not_found ? "FAIL" : "PASS");
  free(got);
  return mixed || not_found ? 1 : 0;
}

int main(int argc, char** argv) {
  static const struct option longopts[] = {
      {"port", required_argument, NULL, 'p'},       {"tcp", no_argument, NULL, 't'},
      {"ops", required_argument, NULL, 'n'},        {"get-ratio", required_argument, NULL, 'g'},
      {"keys", required_argument, NULL, 'k'},       {"value-size", required_argument, NULL, 'v'},
      {"check", no_argument, NULL, 'C'},            {"torn", required_argument, NULL, 'T'},
      {"key-prefix", required_argument, NULL, 'P'}, {"seconds", required_argument, NULL, 's'},
      {"read-hint", required_argument, NULL, 'r'},  {"seed", required_argument, NULL, 'S'},
      {"timeout-ms", required_argument, NULL, 'o'}, {"ack-timeout", required_argument, NULL, 'A'},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
  };
  int ch;
  while ((ch = getopt_long(argc, argv, "p:n:h", longopts, NULL)) != -1) {
    switch (ch) {
      case 'p': opt.port = (uint16_t)kv_parse_u64(optarg, "--port", 1, 65535); break;
      case 't': opt.tcp = true; break;
      case 'n': opt.ops = kv_parse_u64(optarg, "--ops", 1, 100000000); opt.ops_given = true; break;
      case 'g': opt.get_ratio = kv_parse_double(optarg, "--get-ratio", 0, 1); break;
      case 'k': opt.keys = (uint32_t)kv_parse_u64(optarg, "--keys", 1, KV_BUCKETS_LIMIT); break;
      case 'v':
        opt.value_size = (uint32_t)kv_parse_u64(optarg, "--value-size", 1, KV_VALUE_MAX_LIMIT);
        opt.value_size_given = true;
        break;
      case 'C': opt.mode = MODE_CHECK; break;
      case 'T':
        if (!strcmp(optarg, "write"))
          opt.mode = MODE_TORN_WRITE;
        else if (!strcmp(optarg, "read"))
          opt.mode = MODE_TORN_READ;
        else {
          fprintf(stderr, "kv_client: --torn takes 'write' or 'read', not '%s'\n", optarg);
          return 2;
        }
        break;
      case 'P': opt.key_prefix = optarg; break;
      case 's': opt.seconds = kv_parse_double(optarg, "--seconds", 0.001, 86400); break;
      case 'r':
        opt.read_hint = (uint32_t)kv_parse_u64(optarg, "--read-hint", 0, KV_VALUE_MAX_LIMIT);
        opt.read_hint_given = true;
        break;
      case 'S': opt.seed = kv_parse_u64(optarg, "--seed", 0, UINT64_MAX); break;
      case 'o': opt.timeout_ms = (unsigned)kv_parse_u64(optarg, "--timeout-ms", 1, 3600000); break;
      case 'A': opt.ack_timeout = (uint8_t)kv_parse_u64(optarg, "--ack-timeout", 1, 31); break;
      case 'h': fputs(usage_text, stdout); return 0;
      default: fputs(usage_text, stderr); return 2;
    }
  }
  if (optind + 1 != argc) {
    fprintf(stderr, "kv_client: %s\n%s", optind == argc ? "no SERVER given" : "more than one SERVER given",
            usage_text);
    return 2;
  }
  opt.server = argv[optind];
  static char check_prefix[32];
  if (!opt.key_prefix) {
    snprintf(check_prefix, sizeof check_prefix, "c%d-", (int)getpid());
    opt.key_prefix = opt.mode == MODE_CHECK ? check_prefix : "k";
  }
  if (strlen(opt.key_prefix) + 8 > KV_KEY_MAX) {
    fprintf(stderr, "kv_client: --key-prefix is too long (keys are at most %d bytes)\n", KV_KEY_MAX);
    return 2;
  }
  if ((opt.mode == MODE_TORN_WRITE || opt.mode == MODE_TORN_READ) && !opt.value_size_given) opt.value_size = 4000;
  if (!opt.read_hint_given) opt.read_hint = opt.value_size;
  if (opt.mode == MODE_TORN_READ && !opt.ops_given) opt.ops = 2000;
  rng_state = opt.seed * 0x9e3779b97f4a7c15ull + 1;

  if (opt.tcp)
    tcp_connect_server();
  else
    rdma_connect_server();
  int rc;
  switch (opt.mode) {
    case MODE_CHECK: rc = run_check(); break;
    case MODE_TORN_WRITE: rc = run_torn_write(); break;
    case MODE_TORN_READ: rc = run_torn_read(); break;
    case MODE_LOAD: rc = run_load(); break;
    default: rc = 2; break;
  }
  if (opt.tcp)
    close(tcp_fd);
  else
    rdma_close();
  return rc;
}
