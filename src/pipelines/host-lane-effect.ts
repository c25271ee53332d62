/**
 * What running a gateway's host lane in process means for its users, apart from the lane itself
 * (host-lane.ts) so that the daemon's log and status can say it without loading the lane.
 */
/** What running the host lane in process changes (start log, `weft show`). */
export const HOST_LANE_SOCKETS_EFFECT =
  'no host device (TUN): no kernel addresses, routes or sysctls are installed; the gateway answers ' +
  'ICMP echo to its own addresses and runs the connection check in process; UDP, TCP (terminated in ' +
  'process) and ICMP echo (where net.ipv4.ping_group_range allows) routed out of its own interface are ' +
  "relayed through its own sockets, leaving with the gateway's address; TCP to its own addresses and " +
  "other protocols are counted drops (host_lane_*); the gateway host's own processes cannot reach the fabric";
