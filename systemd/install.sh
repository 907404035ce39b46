#!/bin/sh
# Sets countd up as a system service, from the package this script is part of (installed with
# `npm install -g`). Run as root: sudo sh "$(npm root -g)/countd/systemd/install.sh"
# Files that exist are kept, except the unit, which is the package's. With --root DIR everything
# is written under DIR, for a look before installing or for packaging: no user is created, nothing
# is chowned and systemd is not told.
set -eu

root=""
if [ "${1:-}" = "--root" ] && [ -n "${2:-}" ]; then
  root=$2
elif [ $# -gt 0 ]; then
  echo "usage: install.sh [--root DIR]" >&2
  exit 2
fi

package=$(cd "$(dirname "$0")/.." && pwd -P)
node=$(command -v node) || { echo "countd: node is not on PATH" >&2; exit 1; }
if [ -z "$root" ]; then
  # ProtectHome=yes hides /home and /root from the service: a Node or countd there would not start.
  case "$package:$node" in
    /home/* | /root/* | *:/home/* | *:/root/*)
      echo "countd: $package or $node is under /home or /root, which the service cannot see; install Node and countd system-wide" >&2
      exit 1
      ;;
  esac
fi

step() { echo "countd: $*"; }

# A folder, owned by the countd user when it is to write there.
folder() { # mode path [owner]
  install -d -m "$1" "$root$2"
  if [ -n "${3:-}" ] && [ -z "$root" ]; then chown "$3" "$root$2"; fi
  step "folder $2"
}

if [ -n "$root" ]; then
  step "user countd: not created under --root"
elif id countd >/dev/null 2>&1; then
  step "user countd: exists"
else
  useradd --system --home-dir /var/lib/countd --shell /usr/sbin/nologin countd
  step "user countd: created"
fi

folder 0755 /etc/countd
folder 0755 /etc/countd/jobs
folder 0700 /etc/countd/credentials
# systemd creates these too (StateDirectory=, LogsDirectory=); made here so that `countd history`
# run as the countd user works before the first start.
folder 0700 /var/lib/countd countd:countd
folder 0700 /var/log/countd countd:countd

config=/etc/countd/countd.yaml
if [ -e "$root$config" ]; then
  step "$config: kept"
else
  cat >"$root$config" <<'EOF'
# countd under systemd. Every other setting, with its default: countd.example.yaml in the package.
# The state and the logs live where the unit lets countd write; the jobs are read from jobs/ here.
workspace: /var/lib/countd/workspace
state_dir: /var/lib/countd/state
logs_dir: /var/log/countd
jobs_dir: /etc/countd/jobs
EOF
  chmod 0644 "$root$config"
  step "$config: written"
fi

env_file=/etc/countd/countd.env
if [ -e "$root$env_file" ]; then
  step "$env_file: kept"
else
  # Root's alone: it will hold API keys. systemd reads it before dropping to the countd user.
  (umask 077 && printf '# OPENAI_API_KEY=sk-...\n# SMTP_PASSWORD=...\n' >"$root$env_file")
  step "$env_file: written"
fi

unit=/etc/systemd/system/countd.service
install -d -m 0755 "$root/etc/systemd/system"
sed -e "s|^ExecStart=.*|ExecStart=$node $package/bin/countd.js --config $config start|" \
  -e "s|^Documentation=.*|Documentation=file://$package/README.md|" \
  "$package/systemd/countd.service" >"$root$unit"
chmod 0644 "$root$unit"
step "$unit: written (countd in $package)"

if [ -z "$root" ]; then
  systemctl daemon-reload
  step "systemd reloaded"
fi
step "next: API keys in $env_file, job files in /etc/countd/jobs, then: systemctl enable --now countd"
