#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "emu/gsi.h"
#include "rdmacm_shim/shim.h"
#include "verbs_shim/sibling.h"

// Weak: absent when the verbs shim is not loaded (then everything passes through).
extern "C" void* rocelab_verbs_engine(ibv_context* ctx) noexcept __attribute__((weak));
extern "C" void rocelab_verbs_set_services(void* engine, const uint64_t* service_ids,
                                           size_t n) noexcept __attribute__((weak));
extern "C" int rocelab_verbs_service_taken(void* engine, uint64_t service_id) noexcept __attribute__((weak));

namespace rocelab::rdmacm_shim {

namespace {
// QP 1 after exit has begun: MADs still in flight (the DREP to a program that
// exited right after rdma_disconnect, as rping's client does) are taken
// silently instead of being dropped as "unknown QP" with a warning; the
// kernel's CM would take them too (its connection sits in timewait).
class ExitSink final : public emu::GsiClient {
 public:
  void on_mad(const emu::GsiMad&) override {}
};
}  // namespace

State& State::get() noexcept {
  // Never destroyed: programs call librdmacm from their own atexit handlers
  // and threads; at_exit() ends the ids and closes the devices instead.
  static State* s = new State();
  return *s;
}

State::State() noexcept {
  const char* explain = std::getenv("ROCELAB_EXPLAIN");
  explain_ = explain && *explain && std::string_view(explain) != "0";
  if (rocelab_verbs_engine == nullptr) return;
  int n = 0;
  // ibv_* binds to the preloaded verbs shim: emulated devices and real ones.
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return;
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) continue;
    auto* engine = static_cast<emu::Device*>(rocelab_verbs_engine(ctx));
    if (!engine) {
      ibv_close_device(ctx);
      continue;
    }
    Dev d;
    d.ctx = ctx;
    d.engine = engine;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0) {
      d.max_responder_resources = static_cast<uint8_t>(attr.max_qp_rd_atom);
      d.max_initiator_depth = static_cast<uint8_t>(attr.max_qp_init_rd_atom);
    }
    devs_.push_back(d);
  }
  ibv_free_device_list(list);
  if (devs_.empty()) return;
  cm::CmConfig cfg;
  // The kernel's CM sends a DREQ for each established connection of a
  // process that dies; the reaper does it for us (reaper.h).
  if (reaper_.start())
    cfg.farewell = [this](uint32_t key, std::span<const std::byte> dg) { reaper_.farewell(key, dg); };
  // Where other processes share a device's address, REQs reach the one
  // that listens on their service (host::AddressGroup).
  if (rocelab_verbs_set_services != nullptr) {
    cfg.on_listens = [](emu::Device& dev, std::vector<uint64_t> ids) {
      rocelab_verbs_set_services(&dev, ids.data(), ids.size());
    };
  }
  if (rocelab_verbs_service_taken != nullptr) {
    cfg.listened_elsewhere = [](emu::Device& dev, uint64_t sid) { return rocelab_verbs_service_taken(&dev, sid) != 0; };
  }
  cm_ = new cm::Cm(cfg);
  for (Dev& d : devs_) {
    if (std::error_code ec = cm_->add_device(*d.engine)) {
      std::fprintf(stderr, "rocelab rdma_cm: device %s: %s\n", ibv_get_device_name(d.ctx->device),
                   ec.message().c_str());
    }
  }
  std::atexit(at_exit);
}

// At exit the Cm lets go of the devices (its timers stop; nothing calls into
// it from the engines' helper threads any more) and a sink takes QP 1's late
// MADs. The shim's contexts stay open, as a verbs program's often do: the
// program may have closed or may still use them, and the verbs shim's own
// exit handling (counters) and stdio's (the pcap) apply.
void State::at_exit() noexcept {
  State& s = get();
  if (!s.cm_) return;
  static emu::GsiClient* const sink = new ExitSink();
  for (Dev& d : s.devs_) {
    (void)s.cm_->remove_device(*d.engine);
    (void)d.engine->set_gsi_client(sink);
  }
}

Dev* State::dev_of(const emu::Device* engine) noexcept {
  for (Dev& d : devs_) {
    if (d.engine == engine) return &d;
  }
  return nullptr;
}

Dev* State::dev_of(const ibv_context* ctx) noexcept {
  for (Dev& d : devs_) {
    if (d.ctx == ctx) return &d;
  }
  return nullptr;
}

void State::bury(Channel* c) noexcept {
  std::lock_guard lock(mu_);
  try {
    graveyard_.push_back(c);
  } catch (...) {  // out of memory: the struct is simply not tracked
  }
}

ibv_pd* State::default_pd(Dev& d) noexcept {
  std::lock_guard lock(mu_);
  if (!d.pd) d.pd = ibv_alloc_pd(d.ctx);
  return d.pd;
}

}  // namespace rocelab::rdmacm_shim
