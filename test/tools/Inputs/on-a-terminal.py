"""Runs a command with a pseudo-terminal as its standard output (as when a
user types it) and exits with the command's exit code; what it printed is
echoed to this script's standard output."""
import os
import pty
import sys

output = bytearray()


def read(fd):
    data = os.read(fd, 4096)
    output.extend(data)
    return data


status = pty.spawn(sys.argv[1:], read)
sys.stdout.write(output.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
