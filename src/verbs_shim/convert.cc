#include "verbs_shim/convert.h"

#include <algorithm>

namespace rocelab::verbs_shim {

void to_ibv(const emu::DeviceAttr& in, ibv_device_attr* out) {
  *out = ibv_device_attr{};
  std::snprintf(out->fw_ver, sizeof out->fw_ver, "%s", in.fw_ver.c_str());
  out->node_guid = htobe64(in.node_guid);
  out->sys_image_guid = htobe64(in.sys_image_guid);
  out->max_mr_size = in.max_mr_size;
  out->page_size_cap = in.page_size_cap;
  out->vendor_id = in.vendor_id;
  out->vendor_part_id = in.vendor_part_id;
  out->hw_ver = in.hw_ver;
  out->max_qp = in.max_qp;
  out->max_qp_wr = in.max_qp_wr;
  out->device_cap_flags = in.device_cap_flags;
  out->max_sge = in.max_sge;
  out->max_sge_rd = in.max_sge_rd;
  out->max_cq = in.max_cq;
  out->max_cqe = in.max_cqe;
  out->max_mr = in.max_mr;
  out->max_pd = in.max_pd;
  out->max_qp_rd_atom = in.max_qp_rd_atom;
  out->max_ee_rd_atom = in.max_ee_rd_atom;
  out->max_res_rd_atom = in.max_res_rd_atom;
  out->max_qp_init_rd_atom = in.max_qp_init_rd_atom;
  out->max_ee_init_rd_atom = in.max_ee_init_rd_atom;
  out->atomic_cap = static_cast<ibv_atomic_cap>(in.atomic_cap);
  out->max_ee = in.max_ee;
  out->max_rdd = in.max_rdd;
  out->max_mw = in.max_mw;
  out->max_raw_ipv6_qp = in.max_raw_ipv6_qp;
  out->max_raw_ethy_qp = in.max_raw_ethy_qp;
  out->max_mcast_grp = in.max_mcast_grp;
  out->max_mcast_qp_attach = in.max_mcast_qp_attach;
  out->max_total_mcast_qp_attach = in.max_total_mcast_qp_attach;
  out->max_ah = in.max_ah;
  out->max_fmr = in.max_fmr;
  out->max_map_per_fmr = in.max_map_per_fmr;
  out->max_srq = in.max_srq;
  out->max_srq_wr = in.max_srq_wr;
  out->max_srq_sge = in.max_srq_sge;
  out->max_pkeys = in.max_pkeys;
  out->local_ca_ack_delay = in.local_ca_ack_delay;
  out->phys_port_cnt = in.phys_port_cnt;
}

void to_ibv(const emu::PortAttr& in, ibv_port_attr* out) {
  *out = ibv_port_attr{};
  out->state = static_cast<ibv_port_state>(in.state);
  out->max_mtu = static_cast<ibv_mtu>(in.max_mtu);
  out->active_mtu = static_cast<ibv_mtu>(in.active_mtu);
  out->gid_tbl_len = in.gid_tbl_len;
  out->port_cap_flags = in.port_cap_flags;
  out->max_msg_sz = in.max_msg_sz;
  out->bad_pkey_cntr = in.bad_pkey_cntr;
  out->qkey_viol_cntr = in.qkey_viol_cntr;
  out->pkey_tbl_len = in.pkey_tbl_len;
  out->lid = in.lid;
  out->sm_lid = in.sm_lid;
  out->lmc = in.lmc;
  out->max_vl_num = in.max_vl_num;
  out->sm_sl = in.sm_sl;
  out->subnet_timeout = in.subnet_timeout;
  out->init_type_reply = in.init_type_reply;
  out->active_width = in.active_width;
  out->active_speed = in.active_speed;
  out->phys_state = in.phys_state;
  out->link_layer = static_cast<uint8_t>(in.link_layer);
  out->flags = in.flags;
  out->port_cap_flags2 = in.port_cap_flags2;
}

void to_ibv(const emu::AhAttr& in, ibv_ah_attr* out) {
  *out = ibv_ah_attr{};
  std::memcpy(out->grh.dgid.raw, in.dgid.data(), sizeof out->grh.dgid.raw);
  out->grh.flow_label = in.flow_label;
  out->grh.sgid_index = in.sgid_index;
  out->grh.hop_limit = in.hop_limit;
  out->grh.traffic_class = in.traffic_class;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->is_global = in.is_global ? 1 : 0;
  out->port_num = in.port_num;
}

emu::AhAttr from_ibv(const ibv_ah_attr& in) {
  emu::AhAttr out;
  std::memcpy(out.dgid.data(), in.grh.dgid.raw, out.dgid.size());
  out.flow_label = in.grh.flow_label;
  out.sgid_index = in.grh.sgid_index;
  out.hop_limit = in.grh.hop_limit;
  out.traffic_class = in.grh.traffic_class;
  out.dlid = in.dlid;
  out.sl = in.sl;
  out.src_path_bits = in.src_path_bits;
  out.static_rate = in.static_rate;
  out.is_global = in.is_global != 0;
  out.port_num = in.port_num;
  return out;
}

void to_ibv(const emu::QpCap& in, ibv_qp_cap* out) {
  out->max_send_wr = in.max_send_wr;
  out->max_recv_wr = in.max_recv_wr;
  out->max_send_sge = in.max_send_sge;
  out->max_recv_sge = in.max_recv_sge;
  out->max_inline_data = in.max_inline_data;
}

emu::QpCap from_ibv(const ibv_qp_cap& in) {
  emu::QpCap out;
  out.max_send_wr = in.max_send_wr;
  out.max_recv_wr = in.max_recv_wr;
  out.max_send_sge = in.max_send_sge;
  out.max_recv_sge = in.max_recv_sge;
  out.max_inline_data = in.max_inline_data;
  return out;
}

void to_ibv(const emu::QpAttr& in, ibv_qp_attr* out) {
  *out = ibv_qp_attr{};
  out->qp_state = static_cast<ibv_qp_state>(in.qp_state);
  out->cur_qp_state = static_cast<ibv_qp_state>(in.cur_qp_state);
  out->path_mtu = static_cast<ibv_mtu>(in.path_mtu);
  out->path_mig_state = static_cast<ibv_mig_state>(in.path_mig_state);
  out->qkey = in.qkey;
  out->rq_psn = in.rq_psn;
  out->sq_psn = in.sq_psn;
  out->dest_qp_num = in.dest_qp_num;
  out->qp_access_flags = in.qp_access_flags;
  to_ibv(in.cap, &out->cap);
  to_ibv(in.ah_attr, &out->ah_attr);
  to_ibv(in.alt_ah_attr, &out->alt_ah_attr);
  out->pkey_index = in.pkey_index;
  out->alt_pkey_index = in.alt_pkey_index;
  out->en_sqd_async_notify = in.en_sqd_async_notify;
  out->sq_draining = in.sq_draining;
  out->max_rd_atomic = in.max_rd_atomic;
  out->max_dest_rd_atomic = in.max_dest_rd_atomic;
  out->min_rnr_timer = in.min_rnr_timer;
  out->port_num = in.port_num;
  out->timeout = in.timeout;
  out->retry_cnt = in.retry_cnt;
  out->rnr_retry = in.rnr_retry;
  out->alt_port_num = in.alt_port_num;
  out->alt_timeout = in.alt_timeout;
  out->rate_limit = in.rate_limit;
}

emu::QpAttr from_ibv(const ibv_qp_attr& in) {
  emu::QpAttr out;
  // The engine's enums are uint8_t-based: any value converts, and it rejects
  // the ones that name nothing. Values past 255 are clamped to 255 (invalid).
  auto u8 = [](auto v) { return static_cast<uint8_t>(v > 255 ? 255 : v); };
  out.qp_state = static_cast<emu::QpState>(u8(raw_enum(in.qp_state)));
  out.cur_qp_state = static_cast<emu::QpState>(u8(raw_enum(in.cur_qp_state)));
  out.path_mtu = static_cast<emu::Mtu>(u8(raw_enum(in.path_mtu)));
  out.path_mig_state = static_cast<emu::MigState>(u8(raw_enum(in.path_mig_state)));
  out.qkey = in.qkey;
  out.rq_psn = in.rq_psn;
  out.sq_psn = in.sq_psn;
  out.dest_qp_num = in.dest_qp_num;
  out.qp_access_flags = static_cast<unsigned>(in.qp_access_flags);
  out.cap = from_ibv(in.cap);
  out.ah_attr = from_ibv(in.ah_attr);
  out.alt_ah_attr = from_ibv(in.alt_ah_attr);
  out.pkey_index = in.pkey_index;
  out.alt_pkey_index = in.alt_pkey_index;
  out.en_sqd_async_notify = in.en_sqd_async_notify;
  out.sq_draining = in.sq_draining;
  out.max_rd_atomic = in.max_rd_atomic;
  out.max_dest_rd_atomic = in.max_dest_rd_atomic;
  out.min_rnr_timer = in.min_rnr_timer;
  out.port_num = in.port_num;
  out.timeout = in.timeout;
  out.retry_cnt = in.retry_cnt;
  out.rnr_retry = in.rnr_retry;
  out.alt_port_num = in.alt_port_num;
  out.alt_timeout = in.alt_timeout;
  out.rate_limit = in.rate_limit;
  return out;
}

void to_ibv(const emu::Wc& in, ibv_wc* out) {
  out->wr_id = in.wr_id;
  out->status = static_cast<ibv_wc_status>(in.status);
  out->opcode = static_cast<ibv_wc_opcode>(in.opcode);
  out->vendor_err = in.vendor_err;
  out->byte_len = in.byte_len;
  out->imm_data = in.imm_data;
  out->qp_num = in.qp_num;
  out->src_qp = in.src_qp;
  out->wc_flags = in.wc_flags;
  out->pkey_index = in.pkey_index;
  out->slid = in.slid;
  out->sl = in.sl;
  out->dlid_path_bits = in.dlid_path_bits;
}

}  // namespace rocelab::verbs_shim
