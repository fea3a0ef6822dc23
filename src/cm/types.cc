// Names of the rdma_cm vocabulary (types.h).
#include "cm/types.h"

#include <algorithm>

namespace rocelab::cm {

bool SockAddr::is_any() const {
  const size_t n = ip.v6 ? 16 : 4;
  return std::all_of(ip.b.begin(), ip.b.begin() + static_cast<long>(n), [](uint8_t v) { return v == 0; });
}

std::string_view to_string(EventType t) {
  switch (t) {
    case EventType::kAddrResolved: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case EventType::kAddrError: return "RDMA_CM_EVENT_ADDR_ERROR";
    case EventType::kRouteResolved: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case EventType::kRouteError: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case EventType::kConnectRequest: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case EventType::kConnectResponse: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case EventType::kConnectError: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case EventType::kUnreachable: return "RDMA_CM_EVENT_UNREACHABLE";
    case EventType::kRejected: return "RDMA_CM_EVENT_REJECTED";
    case EventType::kEstablished: return "RDMA_CM_EVENT_ESTABLISHED";
    case EventType::kDisconnected: return "RDMA_CM_EVENT_DISCONNECTED";
    case EventType::kDeviceRemoval: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case EventType::kMulticastJoin: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case EventType::kMulticastError: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case EventType::kAddrChange: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case EventType::kTimewaitExit: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}

std::string_view to_string(IdState s) {
  switch (s) {
    case IdState::kIdle: return "idle";
    case IdState::kAddrQuery: return "addr_query";
    case IdState::kAddrResolved: return "addr_resolved";
    case IdState::kAddrBound: return "addr_bound";
    case IdState::kRouteQuery: return "route_query";
    case IdState::kRouteResolved: return "route_resolved";
    case IdState::kConnect: return "connect";
    case IdState::kConnectResponse: return "connect_response";
    case IdState::kListen: return "listen";
    case IdState::kConnectRequest: return "connect_request";
    case IdState::kAccepted: return "accepted";
    case IdState::kEstablished: return "established";
    case IdState::kDisconnect: return "disconnect";
    case IdState::kTimewait: return "timewait";
    case IdState::kDestroying: return "destroying";
  }
  return "?";
}

}  // namespace rocelab::cm
