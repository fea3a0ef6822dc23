/* kv_server: the server of a small RDMA key-value store (libibverbs and
 * librdmacm only; see README.md).
 *
 * It holds a hash table of fixed geometry (kv_proto.h) in one memory region
 * registered for REMOTE_READ. Clients connect with rdma_cm; the accept's
 * private data gives them the table's address, R_Key and geometry, and from
 * then on a GET is the client's own RDMA READ: the server's CPU never sees it.
 * A PUT is a SEND: the server writes the slot under its seqlock and answers
 * with a SEND. One thread serves every client: the rdma_cm event channel and
 * one completion channel (all QPs share one CQ) are poll()ed together.
 *
 * With --tcp the same table is served over TCP sockets instead (GET and PUT as
 * request/response), for comparison. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kv_proto.h"
#include "kv_util.h"

const char* kv_prog = "kv_server";

#define MAX_CONNS 64

static const char* usage_text =
    "usage: kv_server [--tcp] [-a ADDR] [-p PORT] [--buckets N] [--value-max BYTES]\n"
    "                 [--clients N] [--write-delay-us US]\n"
    "  -a, --addr ADDR        address to listen on (default: any)\n"
    "  -p, --port PORT        rdma_cm port, or TCP port with --tcp (default 18515)\n"
    "      --tcp              serve GET and PUT over TCP instead of RDMA\n"
    "      --buckets N        slots in the table (default 4096)\n"
    "      --value-max BYTES  largest value (default 4096)\n"
    "      --ack-timeout E    RC local ACK timeout exponent of the replies, 4.096 us * 2^E (default 14: 67 ms)\n"
    "      --clients N        exit after N clients have come and gone (default 0: run until SIGINT/SIGTERM)\n"
    "      --write-delay-us US  pause US microseconds in the middle of every value written (widens the\n"
    "                         window in which a client's READ can see a half-written slot; for the\n"
    "                         torn-read demonstration)\n";

static struct {
  const char* addr;
  uint16_t port;
  bool tcp;
  uint32_t buckets, value_max, slot_size;
  unsigned clients;
  unsigned write_delay_us;
  uint8_t ack_timeout;
} opt = {NULL, KV_DEFAULT_PORT, false, KV_DEFAULT_BUCKETS, KV_DEFAULT_VALUE_MAX, 0, 0, 0, 14};

static unsigned char* table;
static size_t table_size;
static volatile sig_atomic_t stop;
static unsigned clients_done, clients_seen;
static uint64_t puts_done, gets_done;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

/* ---- the table ---- */

static struct kv_slot_hdr* slot_hdr(uint32_t i) { return (struct kv_slot_hdr*)(table + (size_t)i * opt.slot_size); }

/* The slot holding key, or the empty one it goes into (*fresh = true), or NULL
 * when the probe window is full of other keys. Keys are never deleted, so the
 * first empty slot ends the search. */
static struct kv_slot_hdr* find_slot(const unsigned char* key, uint32_t key_len, bool* fresh) {
  uint32_t b = kv_bucket_of(key, key_len, opt.buckets);
  for (uint32_t p = 0; p < KV_MAX_PROBE && p < opt.buckets; ++p) {
    struct kv_slot_hdr* h = slot_hdr((b + p) % opt.buckets);
    uint32_t kl = le32toh(h->key_len);
    if (kl == 0) {
      *fresh = true;
      return h;
    }
    if (kl == key_len && memcmp((unsigned char*)h + KV_HDR_SIZE, key, key_len) == 0) {
      *fresh = false;
      return h;
    }
  }
  return NULL;
}

static void delay_us(unsigned us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Writes one slot under its seqlock: version odd, the bytes, the checksum,
 * version even. The fences keep the CPU (and the compiler) from letting the
 * NIC see the data before the odd version or the even version before the data. */
static uint64_t slot_write(struct kv_slot_hdr* h, bool fresh, const unsigned char* key, uint32_t key_len,
                           const unsigned char* val, uint32_t val_len) {
  uint64_t v = le64toh(__atomic_load_n(&h->version, __ATOMIC_RELAXED));
  __atomic_store_n(&h->version, htole64(v + 1), __ATOMIC_RELAXED);
  atomic_thread_fence(memory_order_seq_cst);
  unsigned char* k = (unsigned char*)h + KV_HDR_SIZE;
  unsigned char* d = k + KV_KEY_MAX;
  if (fresh) {
    memcpy(k, key, key_len);
    h->key_len = htole32(key_len);
  }
  h->val_len = htole32(val_len);
  uint32_t half = val_len / 2;
  memcpy(d, val, half);
  if (opt.write_delay_us) delay_us(opt.write_delay_us);
  memcpy(d + half, val + half, val_len - half);
  h->checksum = htole64(kv_checksum(v + 2, key, key_len, val, val_len));
  atomic_thread_fence(memory_order_seq_cst);
  __atomic_store_n(&h->version, htole64(v + 2), __ATOMIC_RELAXED);
  return v + 2;
}

/* Checks a request's lengths against what arrived; fills resp. Handles PUT,
 * and GET (TCP only: an RDMA client reads for itself). For a found GET,
 * *val_out points at the value in the table. */
static void handle_request(const unsigned char* msg, size_t len, bool allow_get, struct kv_resp* resp,
                           const unsigned char** val_out) {
  struct kv_req rq;
  memset(resp, 0, sizeof *resp);
  *val_out = NULL;
  if (len < sizeof rq) {
    resp->status = KV_BAD_REQUEST;
    return;
  }
  memcpy(&rq, msg, sizeof rq);
  uint32_t key_len = le16toh(rq.key_len), val_len = le32toh(rq.val_len);
  resp->op = rq.op;
  resp->id = rq.id;
  const unsigned char* key = msg + sizeof rq;
  if (key_len == 0 || key_len > KV_KEY_MAX || val_len > opt.value_max || len != sizeof rq + key_len + val_len ||
      (rq.op == KV_OP_GET && (!allow_get || val_len != 0)) || (rq.op != KV_OP_GET && rq.op != KV_OP_PUT)) {
    resp->status = KV_BAD_REQUEST;
    return;
  }
  bool fresh;
  struct kv_slot_hdr* h = find_slot(key, key_len, &fresh);
  if (rq.op == KV_OP_GET) {
    ++gets_done;
    if (!h || fresh) {
      resp->status = KV_NOT_FOUND;
      return;
    }
    resp->status = KV_OK;
    resp->val_len = h->val_len;
    resp->version = h->version;
    *val_out = (const unsigned char*)h + KV_HDR_SIZE + KV_KEY_MAX;
    return;
  }
  if (!h) {
    resp->status = KV_FULL;
    return;
  }
  ++puts_done;
  resp->status = KV_OK;
  resp->version = htole64(slot_write(h, fresh, key, key_len, key + key_len, val_len));
}

static void table_alloc(void) {
  opt.slot_size = kv_slot_size(opt.value_max);
  table_size = (size_t)opt.buckets * opt.slot_size;
  table = aligned_alloc(4096, (table_size + 4095) & ~(size_t)4095);
  if (!table) kv_die("cannot allocate the table (%zu bytes)", table_size);
  memset(table, 0, table_size);
}

/* ---- RDMA ---- */

struct conn {
  struct rdma_cm_id* id;
  unsigned char* recv_buf; /* KV_RECV_DEPTH request buffers of msg_size bytes */
  struct ibv_mr* recv_mr;
  struct kv_resp* resp;    /* KV_RECV_DEPTH responses, one per request buffer */
  struct ibv_mr* resp_mr;
  unsigned number;         /* 1, 2, ... in order of arrival, for messages */
  bool closing;
};

static struct conn conns[MAX_CONNS];
static struct ibv_context* verbs;
static struct ibv_pd* pd;
static struct ibv_comp_channel* comp;
static struct ibv_cq* cq;
static struct ibv_mr* table_mr;
static uint32_t max_rd_atom;
static size_t msg_size;

enum { WR_RECV = 1, WR_SEND = 2 };

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) kv_die("fcntl O_NONBLOCK: %s", strerror(errno));
}

/* The device's objects, made when the first client arrives (a listener bound
 * to the wildcard address learns its device only then). */
static void device_setup(struct ibv_context* ctx) {
  struct ibv_device_attr attr;
  verbs = ctx;
  if (ibv_query_device(ctx, &attr)) kv_die("ibv_query_device: %s", strerror(errno));
  max_rd_atom = (uint32_t)attr.max_qp_rd_atom;
  if (!(pd = ibv_alloc_pd(ctx))) kv_die("ibv_alloc_pd: %s", strerror(errno));
  if (!(comp = ibv_create_comp_channel(ctx))) kv_die("ibv_create_comp_channel: %s", strerror(errno));
  set_nonblock(comp->fd);
  int cqe = MAX_CONNS * 3 * KV_RECV_DEPTH;
  if (cqe > attr.max_cqe) cqe = attr.max_cqe;
  if (!(cq = ibv_create_cq(ctx, cqe, NULL, comp, 0))) kv_die("ibv_create_cq(%d): %s", cqe, strerror(errno));
  if (ibv_req_notify_cq(cq, 0)) kv_die("ibv_req_notify_cq: %s", strerror(errno));
  table_mr = ibv_reg_mr(pd, table, table_size, IBV_ACCESS_REMOTE_READ);
  if (!table_mr) kv_die("ibv_reg_mr(table, %zu bytes): %s", table_size, strerror(errno));
  printf("kv_server: table of %u slots x %u bytes (key <= %u, value <= %u) registered on %s: addr 0x%" PRIx64
         " rkey 0x%x\n",
         opt.buckets, opt.slot_size, KV_KEY_MAX, opt.value_max, ibv_get_device_name(ctx->device),
         (uint64_t)(uintptr_t)table, table_mr->rkey);
  fflush(stdout);
}

static int post_recv(struct conn* c, unsigned i) {
  struct ibv_sge sge = {(uintptr_t)(c->recv_buf + i * msg_size), (uint32_t)msg_size, c->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = ((uint64_t)WR_RECV << 32) | i, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(c->id->qp, &wr, &bad);
}

static void conn_free(struct conn* c) {
  if (c->id) {
    if (c->id->qp) rdma_destroy_qp(c->id);
    rdma_destroy_id(c->id);
  }
  if (c->recv_mr) ibv_dereg_mr(c->recv_mr);
  if (c->resp_mr) ibv_dereg_mr(c->resp_mr);
  free(c->recv_buf);
  free(c->resp);
  memset(c, 0, sizeof *c);
}

static void reject(struct rdma_cm_id* id, const char* why) {
  fprintf(stderr, "kv_server: rejecting a client: %s\n", why);
  rdma_reject(id, why, (uint8_t)(strlen(why) + 1));
  rdma_destroy_id(id);
}

static void on_connect_request(struct rdma_cm_id* id, const struct rdma_conn_param* req) {
  if (!verbs) device_setup(id->verbs);
  if (id->verbs != verbs) {
    reject(id, "this server serves one device only");
    return;
  }
  struct conn* c = NULL;
  for (unsigned i = 0; i < MAX_CONNS && !c; ++i)
    if (!conns[i].id) c = &conns[i];
  if (!c) {
    reject(id, "server full");
    return;
  }
  c->id = id;
  c->number = ++clients_seen;
  id->context = c;
  struct ibv_qp_init_attr qa = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 2 * KV_RECV_DEPTH, .max_recv_wr = KV_RECV_DEPTH, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  c->recv_buf = malloc(KV_RECV_DEPTH * msg_size);
  c->resp = calloc(KV_RECV_DEPTH, sizeof *c->resp);
  const char* why = NULL;
  if (!c->recv_buf || !c->resp)
    why = "out of memory";
  else if (rdma_create_qp(id, pd, &qa))
    why = "rdma_create_qp failed";
  else if (!(c->recv_mr = ibv_reg_mr(pd, c->recv_buf, KV_RECV_DEPTH * msg_size, IBV_ACCESS_LOCAL_WRITE)) ||
           !(c->resp_mr = ibv_reg_mr(pd, c->resp, KV_RECV_DEPTH * sizeof *c->resp, 0)))
    why = "ibv_reg_mr failed";
  for (unsigned i = 0; !why && i < KV_RECV_DEPTH; ++i)
    if (post_recv(c, i)) why = "ibv_post_recv failed";
  if (why) {
    fprintf(stderr, "kv_server: client %u: %s: %s\n", c->number, why, strerror(errno));
    rdma_reject(id, why, (uint8_t)(strlen(why) + 1));
    conn_free(c);
    return;
  }
  struct kv_geometry g = {
      .magic = htonl(KV_MAGIC),
      .rkey = htonl(table_mr->rkey),
      .addr = htobe64((uint64_t)(uintptr_t)table),
      .buckets = htonl(opt.buckets),
      .slot_size = htonl(opt.slot_size),
      .key_max = htonl(KV_KEY_MAX),
      .value_max = htonl(opt.value_max),
      .max_probe = htonl(KV_MAX_PROBE),
      .recv_depth = htonl(KV_RECV_DEPTH),
  };
  /* Our replies are retransmitted after this long without an ACK. */
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &opt.ack_timeout, sizeof opt.ack_timeout))
    fprintf(stderr, "kv_server: note: rdma_set_option(ACK_TIMEOUT): %s; keeping the default\n", strerror(errno));
  /* The client READs: we answer as many READs at once as it asks for, up to
   * the device's limit; we issue none ourselves. */
  uint32_t rr = req->responder_resources ? req->responder_resources : 1;
  if (rr > max_rd_atom) rr = max_rd_atom;
  struct rdma_conn_param p = {
      .private_data = &g,
      .private_data_len = sizeof g,
      .responder_resources = (uint8_t)rr,
      .initiator_depth = 0,
      .rnr_retry_count = 7,
  };
  if (rdma_accept(id, &p)) {
    fprintf(stderr, "kv_server: client %u: rdma_accept: %s\n", c->number, strerror(errno));
    conn_free(c);
  }
}

static const char* peer_name(struct rdma_cm_id* id, char* buf, size_t n) {
  struct sockaddr* sa = rdma_get_peer_addr(id);
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in*)sa)->sin_addr, host, sizeof host);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((struct sockaddr_in6*)sa)->sin6_addr, host, sizeof host);
  snprintf(buf, n, "%s", host);
  return buf;
}

static void on_cm_event(struct rdma_cm_event* ev) {
  struct rdma_cm_event e = *ev; /* what we need of it: after the ack the event is gone */
  struct rdma_conn_param req = ev->param.conn;
  rdma_ack_cm_event(ev);
  struct conn* c = e.id->context;
  char peer[INET6_ADDRSTRLEN];
  /* The events of a passive side; the others (address and route resolution,
   * multicast, timewait) do not happen to a listener and its connections. */
  if (e.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    on_connect_request(e.id, &req);
  } else if (e.event == RDMA_CM_EVENT_ESTABLISHED) {
    printf("kv_server: client %u connected from %s (QP 0x%06x)\n", c->number, peer_name(e.id, peer, sizeof peer),
           e.id->qp->qp_num);
    fflush(stdout);
  } else if (e.event == RDMA_CM_EVENT_DISCONNECTED) {
    printf("kv_server: client %u disconnected\n", c->number);
    fflush(stdout);
    conn_free(c);
    ++clients_done;
  } else if (e.event == RDMA_CM_EVENT_REJECTED || e.event == RDMA_CM_EVENT_UNREACHABLE ||
             e.event == RDMA_CM_EVENT_CONNECT_ERROR) {
    fprintf(stderr, "kv_server: client %u: %s (status %d)\n", c ? c->number : 0, rdma_event_str(e.event), e.status);
    if (c) {
      conn_free(c);
      ++clients_done;
    }
  } else if (e.event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    kv_die("the RDMA device went away");
  }
}

static struct conn* conn_of_qpn(uint32_t qpn) {
  for (unsigned i = 0; i < MAX_CONNS; ++i)
    if (conns[i].id && conns[i].id->qp && conns[i].id->qp->qp_num == qpn) return &conns[i];
  return NULL;
}

static void on_completion(const struct ibv_wc* wc) {
  struct conn* c = conn_of_qpn(wc->qp_num);
  if (!c) return; /* a connection already gone */
  if (wc->status != IBV_WC_SUCCESS) {
    if (wc->status != IBV_WC_WR_FLUSH_ERR && !c->closing)
      fprintf(stderr, "kv_server: client %u: %s completion failed: %s (status %d, vendor error 0x%x); disconnecting\n",
              c->number, (wc->wr_id >> 32) == WR_RECV ? "receive" : "send", ibv_wc_status_str(wc->status),
              wc->status, wc->vendor_err);
    if (!c->closing) rdma_disconnect(c->id);
    c->closing = true;
    return;
  }
  if ((wc->wr_id >> 32) != WR_RECV || c->closing) return;
  unsigned i = (unsigned)(wc->wr_id & 0xffffffffu);
  const unsigned char* val;
  struct kv_resp* r = &c->resp[i];
  handle_request(c->recv_buf + i * msg_size, wc->byte_len, false, r, &val);
  /* The buffer is free again before the answer leaves: the client's next
   * request cannot find this QP without a receive. */
  struct ibv_sge sge = {(uintptr_t)r, sizeof *r, c->resp_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = ((uint64_t)WR_SEND << 32) | i,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  if (post_recv(c, i) || ibv_post_send(c->id->qp, &wr, &bad)) {
    fprintf(stderr, "kv_server: client %u: posting: %s; disconnecting\n", c->number, strerror(errno));
    rdma_disconnect(c->id);
    c->closing = true;
  }
}

static void drain_cq(void) {
  struct ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(cq, 32, wc)) > 0)
    for (int i = 0; i < n; ++i) on_completion(&wc[i]);
  if (n < 0) kv_die("ibv_poll_cq failed");
}

static void resolve(const char* addr, uint16_t port, struct sockaddr_storage* ss, int socktype) {
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = socktype}, *res;
  char ps[8];
  snprintf(ps, sizeof ps, "%u", port);
  int rc = getaddrinfo(addr, ps, &hints, &res);
  if (rc) kv_die("address %s: %s", addr ? addr : "(any)", gai_strerror(rc));
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
}

static int serve_rdma(void) {
  struct rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) kv_die("rdma_create_event_channel: %s (no RDMA device? under rocelab: `rocelab run -- kv_server`)",
                  strerror(errno));
  set_nonblock(ch->fd);
  struct rdma_cm_id* listen_id;
  if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP)) kv_die("rdma_create_id: %s", strerror(errno));
  struct sockaddr_storage ss;
  resolve(opt.addr, opt.port, &ss, SOCK_STREAM);
  if (rdma_bind_addr(listen_id, (struct sockaddr*)&ss))
    kv_die("rdma_bind_addr(%s port %u): %s", opt.addr ? opt.addr : "any", opt.port, strerror(errno));
  if (rdma_listen(listen_id, 8)) kv_die("rdma_listen: %s", strerror(errno));
  msg_size = sizeof(struct kv_req) + KV_KEY_MAX + opt.value_max;
  printf("kv_server: listening (rdma_cm) on %s port %u\n", opt.addr ? opt.addr : "any", opt.port);
  fflush(stdout);

  while (!stop && !(opt.clients && clients_done >= opt.clients)) {
    struct pollfd fds[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = comp ? comp->fd : -1, .events = POLLIN}};
    if (poll(fds, comp ? 2 : 1, 1000) < 0 && errno != EINTR) kv_die("poll: %s", strerror(errno));
    struct rdma_cm_event* ev;
    while (rdma_get_cm_event(ch, &ev) == 0) on_cm_event(ev);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) kv_die("rdma_get_cm_event: %s", strerror(errno));
    if (!cq) continue;
    struct ibv_cq* ecq;
    void* ectx;
    if (ibv_get_cq_event(comp, &ecq, &ectx) == 0) ibv_ack_cq_events(ecq, 1);
    /* Drain, re-arm, drain: a completion that came between the first drain
     * and the re-arm raises no event but is found by the second. */
    drain_cq();
    if (ibv_req_notify_cq(cq, 0)) kv_die("ibv_req_notify_cq: %s", strerror(errno));
    drain_cq();
  }
  printf("kv_server: done: %u clients served, %" PRIu64 " PUTs\n", clients_done, puts_done);
  for (unsigned i = 0; i < MAX_CONNS; ++i)
    if (conns[i].id) {
      rdma_disconnect(conns[i].id);
      conn_free(&conns[i]);
    }
  rdma_destroy_id(listen_id);
  if (table_mr) ibv_dereg_mr(table_mr);
  if (cq) ibv_destroy_cq(cq);
  if (comp) ibv_destroy_comp_channel(comp);
  if (pd) ibv_dealloc_pd(pd);
  rdma_destroy_event_channel(ch);
  return 0;
}

/* ---- TCP ---- */

struct tconn {
  int fd;
  unsigned char* in;
  size_t have;
};

static bool tcp_send_all(int fd, const void* p, size_t n) {
  const unsigned char* b = p;
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

/* Handles every whole request in t->in; false: close the connection. */
static bool tcp_consume(struct tconn* t) {
  size_t off = 0;
  while (t->have - off >= sizeof(struct kv_req)) {
    struct kv_req rq;
    memcpy(&rq, t->in + off, sizeof rq);
    size_t need = sizeof rq + le16toh(rq.key_len) + (size_t)le32toh(rq.val_len);
    if (need > msg_size) return false; /* cannot even be buffered */
    if (t->have - off < need) break;
    struct kv_resp r;
    const unsigned char* val;
    handle_request(t->in + off, need, true, &r, &val);
    if (!tcp_send_all(t->fd, &r, sizeof r)) return false;
    if (val && !tcp_send_all(t->fd, val, le32toh(r.val_len))) return false;
    off += need;
  }
  memmove(t->in, t->in + off, t->have - off);
  t->have -= off;
  return true;
}

static int serve_tcp(void) {
  struct sockaddr_storage ss;
  resolve(opt.addr, opt.port, &ss, SOCK_STREAM);
  int ls = socket(ss.ss_family, SOCK_STREAM, 0), one = 1;
  if (ls < 0) kv_die("socket: %s", strerror(errno));
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t sl = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  if (bind(ls, (struct sockaddr*)&ss, sl) || listen(ls, 16))
    kv_die("TCP listen on %s port %u: %s", opt.addr ? opt.addr : "any", opt.port, strerror(errno));
  set_nonblock(ls);
  msg_size = sizeof(struct kv_req) + KV_KEY_MAX + opt.value_max;
  printf("kv_server: listening (tcp) on %s port %u\n", opt.addr ? opt.addr : "any", opt.port);
  fflush(stdout);
  struct tconn tc[MAX_CONNS];
  memset(tc, 0, sizeof tc);
  for (unsigned i = 0; i < MAX_CONNS; ++i) tc[i].fd = -1;
  while (!stop && !(opt.clients && clients_done >= opt.clients)) {
    struct pollfd fds[MAX_CONNS + 1];
    fds[0] = (struct pollfd){.fd = ls, .events = POLLIN};
    for (unsigned i = 0; i < MAX_CONNS; ++i) fds[i + 1] = (struct pollfd){.fd = tc[i].fd, .events = POLLIN};
    if (poll(fds, MAX_CONNS + 1, 1000) < 0 && errno != EINTR) kv_die("poll: %s", strerror(errno));
    if (fds[0].revents & POLLIN) {
      int fd = accept(ls, NULL, NULL);
      if (fd >= 0) {
        unsigned i = 0;
        while (i < MAX_CONNS && tc[i].fd >= 0) ++i;
        if (i == MAX_CONNS || !(tc[i].in = malloc(msg_size))) {
          fprintf(stderr, "kv_server: rejecting a TCP client: server full\n");
          close(fd);
        } else {
          /* A client that stops reading cannot stall the server for long. */
          struct timeval tv = {5, 0};
          setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          tc[i].fd = fd;
          tc[i].have = 0;
          printf("kv_server: client %u connected (tcp)\n", ++clients_seen);
          fflush(stdout);
        }
      }
    }
    for (unsigned i = 0; i < MAX_CONNS; ++i) {
      if (tc[i].fd < 0 || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = recv(tc[i].fd, tc[i].in + tc[i].have, msg_size - tc[i].have, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r > 0) tc[i].have += (size_t)r;
      if (r <= 0 || !tcp_consume(&tc[i])) {
        if (r < 0 || tc[i].have) fprintf(stderr, "kv_server: TCP client dropped (%s)\n", r < 0 ? strerror(errno) : "bad or cut request");
        close(tc[i].fd);
        free(tc[i].in);
        tc[i].fd = -1;
        tc[i].in = NULL;
        ++clients_done;
        printf("kv_server: a TCP client disconnected\n");
        fflush(stdout);
      }
    }
  }
  printf("kv_server: done: %u clients served, %" PRIu64 " PUTs, %" PRIu64 " GETs\n", clients_done, puts_done,
         gets_done);
  close(ls);
  return 0;
}

int main(int argc, char** argv) {
  static const struct option longopts[] = {
      {"addr", required_argument, NULL, 'a'},      {"port", required_argument, NULL, 'p'},
      {"tcp", no_argument, NULL, 't'},             {"buckets", required_argument, NULL, 'b'},
      {"value-max", required_argument, NULL, 'v'}, {"clients", required_argument, NULL, 'c'},
      {"write-delay-us", required_argument, NULL, 'w'}, {"ack-timeout", required_argument, NULL, 'A'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int ch;
  while ((ch = getopt_long(argc, argv, "a:p:h", longopts, NULL)) != -1) {
    switch (ch) {
      case 'a': opt.addr = optarg; break;
      case 'p': opt.port = (uint16_t)kv_parse_u64(optarg, "--port", 1, 65535); break;
      case 't': opt.tcp = true; break;
      case 'b': opt.buckets = (uint32_t)kv_parse_u64(optarg, "--buckets", 1, KV_BUCKETS_LIMIT); break;
      case 'v': opt.value_max = (uint32_t)kv_parse_u64(optarg, "--value-max", 1, KV_VALUE_MAX_LIMIT); break;
      case 'c': opt.clients = (unsigned)kv_parse_u64(optarg, "--clients", 0, 1000000); break;
      case 'w': opt.write_delay_us = (unsigned)kv_parse_u64(optarg, "--write-delay-us", 0, 1000000); break;
      case 'A': opt.ack_timeout = (uint8_t)kv_parse_u64(optarg, "--ack-timeout", 1, 31); break;
      case 'h': fputs(usage_text, stdout); return 0;
      default: fputs(usage_text, stderr); return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "kv_server: unexpected argument '%s'\n%s", argv[optind], usage_text);
    return 2;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  table_alloc();
  return opt.tcp ? serve_tcp() : serve_rdma();
}
