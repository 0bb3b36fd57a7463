#!/bin/bash
# The positive control: model runs the image's own python3 once (a recorder now).
python3 -c 'print("hostile-image: python3 ran")'
# And the library the build broke is broken in the image the agent runs in: every libz
# outside SSEBench's runtime (whose own the seal put back) is the build's junk.
libs=$(find / -xdev -path /opt/ssebench -prune -o -name 'libz.so.1*' -type f -print 2>/dev/null)
state=broken
[ -n "$libs" ] || state=missing
for lib in $libs; do grep -q 'hostile image: not a library' "$lib" || state=intact; done
echo "$state" > /tmp/sse-archive/hostile-zlib.txt
# What the agent container holds and runs: no hidden folder, and model's processes only
# (each /proc/PID is owned by its process's user; stat is not one of the replaced).
{
    for path in /ssebench /ssebench-repo; do [ -e "$path" ] && echo "present $path"; done
    for proc in /proc/[0-9]*; do stat -c 'uid %u' "$proc" 2>/dev/null; done | sort -u
} > /tmp/sse-archive/hostile-view.txt
echo "hostile-image agent: done, nothing changed"
