"""Task predicates of the simulated YAM on a scripted world state: a handover needs the left arm
to have held the block aloft first, a relay needs the block to have rested in the middle."""
import numpy as np
import pytest

from vam_sim.yam_mujoco.tasks import HandoverTask, RelayTask


class FakeSim:
    """The two things a task predicate reads: body positions and finger contact counts."""

    def __init__(self, block, left=0, right=0):
        self.block, self.left, self.right = np.asarray(block, float), left, right

    def body_pos(self, name):
        assert name == "block"
        return self.block

    def contacts_between(self, a, b):
        assert b == "block"
        return {"left_finger": self.left, "right_finger": self.right}[a]


@pytest.mark.unit
def test_a_block_the_right_arm_fetched_from_the_table_is_no_handover():
    task = HandoverTask()
    task.passed = False
    carried_right = FakeSim([0.35, -0.12, 0.20], left=0, right=4)      # held up on the right side, left free
    task.observe(FakeSim([0.33, 0.15, 0.05], left=0, right=4))       # the right grasps it on the table
    task.observe(carried_right)
    assert not task.success(carried_right) and not task.passed
    assert task.milestones(carried_right) | {"success": False} == {
        "left_lifted": False, "at_meet": False, "both_hold": False, "left_released": True, "success": False}
    task.observe(FakeSim([0.33, 0.15, 0.12], left=1, right=0))       # one left contact is no hold
    assert not task.passed
    task.observe(FakeSim([0.33, 0.15, 0.12], left=4, right=1))       # the left holds it aloft (right touching)
    assert task.passed and task.success(carried_right)


@pytest.mark.unit
def test_a_relay_needs_the_block_to_rest_in_the_middle_first():
    task = RelayTask()
    task.relayed, task.target = False, np.array([0.34, -0.17])
    on_target = FakeSim([0.34, -0.17, 0.02])
    task.observe(on_target)
    assert not task.success(on_target)
    task.observe(FakeSim([0.36, 0.01, 0.02], left=2))                # in the middle but still held: not yet
    assert not task.relayed
    task.observe(FakeSim([0.36, 0.01, 0.02]))                        # set down and let go
    assert task.relayed and task.success(on_target)


@pytest.mark.unit
def test_the_task_table_is_the_shared_list_of_task_names():
    from vam_sim.yam_mujoco.tasks import TASKS
    from vam_stack.names import YAM_TASKS

    assert tuple(TASKS) == YAM_TASKS
    assert all(cls.name == name for name, cls in TASKS.items())
