#!/bin/sh
# Prints fresh random credentials for a deployment, one VARIABLE=value a
# line: the NATS password of every Engram role (deploy/nats/accounts.conf
# reads ENGRAM_<ROLE>_PASSWORD) and the Redis password.
#
#   sh deploy/credentials.sh > .env                                   # docker compose
#   sh deploy/credentials.sh > deploy/k8s/overlays/dev/credentials.env  # kustomize dev overlay
#
# Both files are git-ignored: never commit them. Production takes the same
# keys from a Secret made by your secret manager (docs/deploying.md).
#
# These are the role users' (the platform user is the default tenant's).
# A named tenant's platform gets its own user: `engram tenant add T -data
# DIR` prints its password once and keeps its hash in DIR; `engram
# nats-config -data DIR -tenants > deploy/nats/accounts.conf` then writes the
# server configuration with every tenant's user (docs/tenants.md).
set -eu
umask 077
for role in INJECTOR EXTRACTOR CONSOLIDATOR COMPACTOR IDLE SETUP PLATFORM OUTPUTS ADMIN REDIS; do
	printf 'ENGRAM_%s_PASSWORD=%s\n' "$role" "$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
done
