"""The two windows a stamped joint target is judged by, written once for every layer that judges one.

A joint target carries the time its tick computed it. Three layers judge that stamp against their
own clock: the policy's safety filter (`vam_control.safety`), the driver node's target gate
(`yam_driver.command_gate`) and the driver core (`yam_driver.driver`, for a caller that passes a
stamp). Each holds the arm on a target older than its stale window (`SafetyConfig.stale_after_s`,
`DriverConfig.watchdog_s`: configurable, both defaulting to `STALE_AFTER_S`, bounded by
config/yam_robot.yaml's `max_watchdog_s`) and refuses one dated further ahead of its clock than
`FUTURE_TOLERANCE_S`: a target from another clock (wall time against a monotonic one) or a
future-dated one is never a command.
"""
STALE_AFTER_S = 0.2  # s: a target older than this, or silence this long, holds the arm (6 ticks at 30 Hz;
#   the motors' own CAN timeout is 0.4 s: i2rt docs, config/yam_robot.yaml)
FUTURE_TOLERANCE_S = 0.05  # s: a stamp further ahead of the judging clock than this is a clock mix-up
#   (1.5 ticks at 30 Hz: two processes' reads of one monotonic clock differ by far less)
