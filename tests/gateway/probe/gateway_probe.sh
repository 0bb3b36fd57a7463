#!/bin/bash
# A probe run for the model gateway's tests. It reports on stdout:
#   gwprobe: reach|noreach HOST:PORT    for each of GWPROBE_TARGETS (GATEWAY: its network's .1)
#   gwprobe: call NAME STATUS BODY      for each chat call, NAME one of: own, other, revoked
# With GWPROBE_LISTEN set it serves HTTP on port 8080 until stopped (a run others try to reach);
# with GWPROBE_AWAIT, it starts once that file appears in its results folder.
trap 'exit 143' TERM
if [ -n "${GWPROBE_LISTEN:-}" ]; then
    mkdir -p /tmp/www && echo "run b" > /tmp/www/index.html
    busybox httpd -f -p 8080 -h /tmp/www &
    echo "gwprobe: listening"
    while true; do sleep 0.2; done
fi
if [ -n "${GWPROBE_AWAIT:-}" ]; then
    # The test's go-ahead: a file it writes into the results folder.
    for _ in $(seq 1200); do [ -e "${SSE_RESULTS:-/var/lib/ssebench/results}/$GWPROBE_AWAIT" ] && break; sleep 0.1; done
fi
own=$(hostname -I | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$' || true)
for target in ${GWPROBE_TARGETS:-}; do
    target=${target/GATEWAY/${own%.*}.1}
    if timeout 4 bash -c "exec 3<>/dev/tcp/${target%:*}/${target##*:}" 2>/dev/null; then
        echo "gwprobe: reach $target"
    else
        echo "gwprobe: noreach $target"
    fi
done
chat() {  # NAME KEY
    local body host port answer
    body='{"model":"'"$SSE_MODEL_NAME"'","messages":[{"role":"user","content":"hi"}]}'
    host=${SSE_BASE_URL#http://}; port=${host##*:}; host=${host%%:*}
    if ! exec 3<>"/dev/tcp/$host/$port"; then
        echo "gwprobe: call $1 000 no connection"
        return
    fi
    printf 'POST /v1/chat/completions HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
        "$host" "$2" "${#body}" "$body" >&3
    answer=$(timeout 60 cat <&3 | tr -d '\r')
    exec 3>&-
    echo "gwprobe: call $1 $(head -1 <<<"$answer" | cut -d' ' -f2) $(tail -1 <<<"$answer" | head -c 400)"
}
chat own "$SSE_API_KEY"
[ -n "${GWPROBE_OTHER_KEY:-}" ] && chat other "$GWPROBE_OTHER_KEY"
[ -n "${GWPROBE_REVOKED_KEY:-}" ] && chat revoked "$GWPROBE_REVOKED_KEY"
exit 0
