"""Runs a command on a pseudo-terminal of its own (40 rows, 120 columns), its controlling
terminal, as `memprof run --live` needs one (benches/modes_cost.sh's `live` variant, on a
machine with no terminal); writes what the terminal showed to LOG and exits with the command's
status. Nothing is typed: the view stays up until the program ends.

    python3 benches/on_a_pty.py LOG COMMAND [ARGS...]
"""
import fcntl
import os
import struct
import subprocess
import sys
import termios


def main():
    log, cmd = sys.argv[1], sys.argv[2:]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    def controlling_terminal():
        # A new session (start_new_session) takes the terminal on its standard input.
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    child = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True, preexec_fn=controlling_terminal)
    os.close(slave)
    with open(log, "wb") as out:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last user closed it
                break
            if not data:
                break
            out.write(data)
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
