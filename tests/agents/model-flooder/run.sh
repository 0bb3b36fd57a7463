#!/bin/bash
# Floods the run's model: 8 calls at once through SSE_BASE_URL with SSE_API_KEY (bash's
# /dev/tcp), three rounds; prints each answer's status. A provider that fails calls
# made this way is the agent's doing, not the provider's.
prompt=$(printf 'fix the bug %.0s' $(seq 60))
body='{"model":"'"$SSE_MODEL_NAME"'","messages":[{"role":"user","content":"'"$prompt"'"}]}'
host=${SSE_BASE_URL#http://}; port=${host##*:}; host=${host%%:*}
call() {
    exec 3<>"/dev/tcp/$host/$port" || { echo "model-flooder: no connection"; return; }
    printf 'POST /v1/chat/completions HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
        "$host" "$SSE_API_KEY" "${#body}" "$body" >&3
    answer=$(timeout 60 cat <&3 | tr -d '\r')
    exec 3>&-
    echo "model-flooder: round $1 call $2: $(head -1 <<<"$answer" | cut -d' ' -f2)"
}
for round in 1 2 3; do
    for n in $(seq 8); do call "$round" "$n" & done
    wait
done
