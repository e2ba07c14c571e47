#!/bin/sh
# install-conf.sh SRC DEST - meson install: copy the example configuration
# (SRC, relative to the prefix) to DEST unless DEST already exists, so an
# operator's edited file survives a reinstall.
set -eu
src=$MESON_INSTALL_DESTDIR_PREFIX/$1
dest=${DESTDIR:-}$2
if [ -e "$dest" ]; then
	echo "install-conf: keeping the existing $dest"
	exit 0
fi
mkdir -p "$(dirname "$dest")"
cp "$src" "$dest"
chmod 0644 "$dest"
echo "install-conf: installed $dest"
