#!/bin/sh
# install.sh installs kubeboot as k3s's install script installs k3s: the
# binary, a kubectl link, a systemd unit (Type=notify: systemd hears
# "ready" once /readyz is 200) and an uninstall script. It downloads
# nothing: give it the binary.
#
#   INSTALL_KUBEBOOT_BIN         the kubeboot binary to install (required;
#                                e.g. kubeboot-linux-amd64 of a release)
#   INSTALL_KUBEBOOT_EXEC        the command and flags the service runs,
#                                default "server"
#   INSTALL_KUBEBOOT_BIN_DIR     default /usr/local/bin
#   INSTALL_KUBEBOOT_ROOT        install under this root instead of /
#                                (for images and tests; nothing is started)
#   INSTALL_KUBEBOOT_SKIP_START  true: install and enable, do not start
#   INSTALL_KUBEBOOT_SKIP_ENABLE true: do not enable or start the unit
set -eu

fatal() {
	echo "install.sh: $*" >&2
	exit 1
}

bin=${INSTALL_KUBEBOOT_BIN:-}
[ -n "$bin" ] || fatal "INSTALL_KUBEBOOT_BIN must name the kubeboot binary to install (this script downloads nothing)"
[ -f "$bin" ] || fatal "INSTALL_KUBEBOOT_BIN=$bin: no such file"
"$bin" version >/dev/null 2>&1 || fatal "INSTALL_KUBEBOOT_BIN=$bin: not a kubeboot binary for this machine ($bin version failed)"

root=${INSTALL_KUBEBOOT_ROOT:-}
bin_dir=${INSTALL_KUBEBOOT_BIN_DIR:-/usr/local/bin}
exec_args=${INSTALL_KUBEBOOT_EXEC:-server}
unit_dir=/etc/systemd/system
uninstall=$bin_dir/kubeboot-uninstall.sh

if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
	fatal "run as root (the service runs as root), or set INSTALL_KUBEBOOT_ROOT"
fi

mkdir -p "$root$bin_dir" "$root$unit_dir"
# Copied aside, then renamed: a running kubeboot keeps its old binary.
cp "$bin" "$root$bin_dir/.kubeboot.new"
chmod 0755 "$root$bin_dir/.kubeboot.new"
mv -f "$root$bin_dir/.kubeboot.new" "$root$bin_dir/kubeboot"
for link in kubectl; do
	if [ -e "$root$bin_dir/$link" ] && [ ! -L "$root$bin_dir/$link" ]; then
		echo "install.sh: $bin_dir/$link exists and is not kubeboot's link; left as it is" >&2
		continue
	fi
	ln -sf kubeboot "$root$bin_dir/$link"
done

cat > "$root$unit_dir/kubeboot.service" <<EOF
[Unit]
Description=kubeboot: a lean Kubernetes control plane
Documentation=https://github.com/kubeboot/kubeboot
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
ExecStart=$bin_dir/kubeboot $exec_args
KillMode=process
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
EOF

cat > "$root$uninstall" <<EOF
#!/bin/sh
# Removes what install.sh installed, and kubeboot's data (/var/lib/kubeboot,
# /etc/kubeboot), as k3s-uninstall.sh does.
set -eu
root=\${INSTALL_KUBEBOOT_ROOT:-}
if [ -z "\$root" ] && command -v systemctl >/dev/null 2>&1; then
	systemctl disable --now kubeboot.service 2>/dev/null || true
fi
rm -f "\$root$unit_dir/kubeboot.service"
if [ -z "\$root" ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
for link in kubectl; do
	if [ -L "\$root$bin_dir/\$link" ] && [ "\$(readlink "\$root$bin_dir/\$link")" = kubeboot ]; then
		rm -f "\$root$bin_dir/\$link"
	fi
done
rm -rf "\$root/var/lib/kubeboot" "\$root/etc/kubeboot"
rm -f "\$root$bin_dir/kubeboot" "\$root$uninstall"
EOF
chmod 0755 "$root$uninstall"

echo "installed $bin_dir/kubeboot ($("$bin" version)), the kubectl link, $unit_dir/kubeboot.service and $uninstall${root:+ under $root}"
if [ -n "$root" ] || [ "${INSTALL_KUBEBOOT_SKIP_ENABLE:-}" = true ]; then
	exit 0
fi
command -v systemctl >/dev/null 2>&1 || fatal "no systemctl: start it yourself with $bin_dir/kubeboot $exec_args"
systemctl daemon-reload
systemctl enable kubeboot.service
if [ "${INSTALL_KUBEBOOT_SKIP_START:-}" != true ]; then
	systemctl restart kubeboot.service
	echo "kubeboot is running: kubectl get --raw /readyz"
fi
