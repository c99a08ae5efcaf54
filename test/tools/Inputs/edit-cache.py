"""Changes a lina cache file behind lina's back, for the tests of `lina cache`:

  edit-cache.py DB add-cubin KEY BYTES SPEC_NAME ARCH AGE_SECONDS
      stores a cubin of BYTES bytes (with its checksum) written AGE_SECONDS ago
  edit-cache.py DB age KEY_PREFIX AGE_SECONDS
      makes the entries whose key starts with KEY_PREFIX (a tuning result's
      candidates included) AGE_SECONDS old
  edit-cache.py DB forget-names
      clears every spec name, as in the rows of a lina before schema 2
"""
import hashlib
import sqlite3
import sys
import time

db = sqlite3.connect(sys.argv[1])
command, args = sys.argv[2], sys.argv[3:]
now = int(time.time())
if command == "add-cubin":
    key, size, name, arch, age = args
    blob = bytes(i % 251 for i in range(int(size)))
    db.execute(
        "INSERT INTO cubins(key, blob, checksum, created, spec_name, arch) "
        "VALUES(?, ?, ?, ?, ?, ?)",
        (key, blob, hashlib.sha256(blob).hexdigest(), now - int(age), name, arch),
    )
elif command == "age":
    prefix, age = args
    created = now - int(age)
    like = prefix + "%"
    db.execute("UPDATE cubins SET created = ? WHERE key LIKE ?", (created, like))
    db.execute("UPDATE tunings SET created = ? WHERE key LIKE ?", (created, like))
    db.execute(
        "UPDATE candidates SET created = ? WHERE tuning_id IN "
        "(SELECT id FROM tunings WHERE key LIKE ?)",
        (created, like),
    )
elif command == "forget-names":
    db.execute("UPDATE cubins SET spec_name = ''")
    db.execute("UPDATE tunings SET spec_name = ''")
else:
    sys.exit("unknown command " + command)
db.commit()
