"""TensorBoard events of a run: what TensorBoard's own reader shows."""

from tensorboard.backend.event_processing import event_accumulator

from sciml.training._events import EventWriter, run_events


def _shown(directory, tag: str) -> list[tuple[int, float]]:
    """The points of `tag` TensorBoard shows, in its order (a step twice if twice)."""
    events = event_accumulator.EventAccumulator(
        str(directory), size_guidance={event_accumulator.SCALARS: 0}
    )
    events.Reload()
    return [(event.step, event.value) for event in events.Scalars(tag)]


def test_a_resumed_run_hides_what_was_logged_after_its_checkpoint(tmp_path):
    # a run logs steps 10..50 and is killed; its checkpoint is at step 30
    first = EventWriter(tmp_path)
    for step in (10, 20, 30, 40, 50):
        first.scalars("train", step, {"step": step, "loss": float(step)})
    first.close()
    # resumed from step 30, it logs 40 and 50 again, with other values
    second = EventWriter(tmp_path)
    second.resume_after(30)
    for step in (40, 50):
        second.scalars("train", step, {"step": step, "loss": -float(step)})
    second.close()
    assert _shown(tmp_path, "train/loss") == [(10, 10), (20, 20), (30, 30), (40, -40), (50, -50)]


def test_a_held_writer_is_resumed_after_its_file_exists(tmp_path):
    # the runner's writer has written already when `fit` inside resumes
    (tmp_path / "old").mkdir()
    old = EventWriter(tmp_path / "old")
    old.scalars("train", 20, {"loss": 1.0})
    old.close()
    with run_events(tmp_path / "old", hparams={"seed": 0}) as held:
        held.scalars("summary", 0, {"started": 1})
        held.resume_after(10)
        held.scalars("train", 20, {"loss": 2.0})
    assert _shown(tmp_path / "old", "train/loss") == [(20, 2.0)]


def test_another_process_of_a_run_writes_no_file(tmp_path):
    quiet = EventWriter(tmp_path, main=False, hparams={"seed": 0})
    quiet.resume_after(3)
    quiet.scalars("train", 4, {"loss": 1.0})
    quiet.close()
    assert list(tmp_path.iterdir()) == []
