"""One mail writer per clone: a second holder is told the clone is busy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentpost.mail.errors import MailBusy
from agentpost.mail.lock import mail_lock


def test_a_second_process_cannot_take_the_lock_while_it_is_held(tmp_path: Path) -> None:
    lock = tmp_path / "agentpost" / "lock"
    probe = (
        "import sys\nfrom pathlib import Path\nfrom agentpost.mail.lock import mail_lock\n"
        "from agentpost.mail.errors import MailBusy\n"
        "try:\n    with mail_lock(Path(sys.argv[1]), 0):\n        print('took')\n"
        "except MailBusy as e:\n    print(e.code)\n"
    )
    with mail_lock(lock, 0):
        held = subprocess.run(
            [sys.executable, "-c", probe, str(lock)], capture_output=True, text=True
        )
        assert held.stdout.strip() == "mail_busy"
    free = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True)
    assert free.stdout.strip() == "took"


def test_the_same_process_is_refused_a_second_descriptor(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with mail_lock(lock, 0), pytest.raises(MailBusy), mail_lock(lock, 0):
        pass
