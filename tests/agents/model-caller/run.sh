#!/bin/bash
# Calls the run's model through SSE_BASE_URL with SSE_API_KEY (bash's /dev/tcp: no
# client library needed) until an answer is neither 200 nor a provider's failure, at
# most 10 times; prints each.
# The prompt is long enough that the gateway counts more tokens than the scripted
# model's 100: its worst case for a call is then at least what the call costs.
prompt=$(printf 'fix the bug %.0s' $(seq 60))
body='{"model":"'"$SSE_MODEL_NAME"'","messages":[{"role":"user","content":"'"$prompt"'"}]}'
host=${SSE_BASE_URL#http://}; port=${host##*:}; host=${host%%:*}
for call in $(seq 10); do
    exec 3<>"/dev/tcp/$host/$port" || { echo "model-caller: no connection"; exit 1; }
    printf 'POST /v1/chat/completions HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
        "$host" "$SSE_API_KEY" "${#body}" "$body" >&3
    answer=$(timeout 60 cat <&3 | tr -d '\r')
    exec 3>&-
    status=$(head -1 <<<"$answer" | cut -d' ' -f2)
    echo "model-caller: call $call: $status $(tail -1 <<<"$answer" | head -c 400)"
    # A provider's failure (408, 429, 5xx) is called again, as agents do; any other answer ends it.
    case $status in 200|408|429|5??) ;; *) exit 0 ;; esac
done
