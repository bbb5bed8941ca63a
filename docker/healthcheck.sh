#!/bin/bash
# The image's HEALTHCHECK: exit 0 when GET /health/ready on UVLLM_HEALTH_PORT answers 200.
# bash's /dev/tcp instead of curl keeps the runtime image to the server's own libraries.
port=${UVLLM_HEALTH_PORT:-8080}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 8 status <&3 || exit 1
case "$status" in
"HTTP/1."[01]" 200"*) exit 0 ;;
*) echo "not ready: ${status%$'\r'}"; exit 1 ;;
esac
