#!/usr/bin/env bash
# Set up (scripts/setup_env.sh) and run the whole test suite on the CPU. Then, where ROS 2's launch,
# launch_testing and ros2cli can be sourced (a ROS 2 install, or an env file named by VAM_ROS_SETUP),
# a second pass with them on the path: the whole suite must collect under launch_testing's pytest
# plugin, and the tests that need launch or the ros2 CLI run (they skip, with the reason, in the
# first pass). With arguments (a subset of tests), only the first pass runs, with those arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
. .venv/bin/activate
python -m pytest -q "$@"
[ "$#" -gt 0 ] && exit 0

ROS_SETUP=""
for f in "${VAM_ROS_SETUP:-}" /opt/ros/jazzy/setup.bash /opt/ros/humble/setup.bash /work/ros_tools/setup.sh; do
  if [ -n "$f" ] && [ -f "$f" ]; then ROS_SETUP="$f"; break; fi
done
if [ -z "$ROS_SETUP" ]; then
  echo "[test] second pass skipped: no ROS 2 launch/ros2cli to source here (set VAM_ROS_SETUP=/path/setup.bash);" \
       "the launch and ros2cli tests above skipped with their reason"
  exit 0
fi
echo "[test] second pass with ROS 2's launch, launch_testing and ros2cli from $ROS_SETUP"
set +u
# shellcheck disable=SC1090
. "$ROS_SETUP"
set -u
python -c "import launch_testing, ros2cli" || { echo "[test] $ROS_SETUP gives no launch_testing/ros2cli"; exit 1; }
python -m pytest -q --collect-only tests > /tmp/vam_collect_with_ros.$$ || {
  tail -30 /tmp/vam_collect_with_ros.$$; rm -f /tmp/vam_collect_with_ros.$$; exit 1; }
tail -1 /tmp/vam_collect_with_ros.$$; rm -f /tmp/vam_collect_with_ros.$$
python -m pytest -q -rs tests/vam_stack/test_launch_sim_ros.py tests/vam_sim/yam_mujoco/test_launch_mujoco_ros.py \
  tests/vam_data/test_launch_record_ros.py tests/vam_stack/test_ros_launch.py \
  tests/vam_stack/test_operator_commands_ros2cli.py tests/vam_stack/test_estop_always_lands.py \
  tests/vam_stack/test_stop_under_load.py
