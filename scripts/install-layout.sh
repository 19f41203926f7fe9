# Sourced by scripts/install and scripts/uninstall: their shared flags, and where
# each file goes. The directories other programs search (dbus-daemon, polkit,
# systemd) come from their pkg-config files, whatever the prefix, as meson and
# autotools projects do; each can be overridden (tests install into a temporary
# directory). Sets PREFIX, DESTDIR, SYSCONFDIR, LOCALSTATEDIR, BUILD_DIR and the
# *_DIR variables below; MANIFEST is the list of what was installed.

usage() {
    cat <<EOF
Usage: $(basename "$0") [OPTIONS]

  --prefix P                   default /usr/local
  --destdir D                  stage everything under D (packaging); paths written
                               into the files stay those without D
  --sysconfdir S               default /etc: the configuration is S/permissions
  --localstatedir V            default /var: the decisions are in V/lib/permissions
  --dbus-system-policy-dir DIR default: dbus-1's datadir/dbus-1/system.d
  --dbus-system-services-dir DIR
                               default: dbus-1's system_bus_services_dir
  --polkit-actions-dir DIR     default: polkit-gobject-1's policydir
                               (/usr/share/polkit-1/actions without it)
  --systemd-unit-dir DIR       default: systemd's systemdsystemunitdir
EOF
    [ "$(basename "$0")" = install ] && cat <<EOF
  --build-dir DIR              install what a release build already put in DIR
                               (swift build -c release --show-bin-path) instead of
                               building
EOF
    return 0
}

PREFIX=/usr/local
DESTDIR=
SYSCONFDIR=/etc
LOCALSTATEDIR=/var
BUILD_DIR=
DBUS_POLICY_DIR=
DBUS_SERVICES_DIR=
POLKIT_DIR=
UNIT_DIR=

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=${2:?--prefix needs a value}; shift 2 ;;
        --destdir) DESTDIR=${2:?--destdir needs a value}; shift 2 ;;
        --sysconfdir) SYSCONFDIR=${2:?--sysconfdir needs a value}; shift 2 ;;
        --localstatedir) LOCALSTATEDIR=${2:?--localstatedir needs a value}; shift 2 ;;
        --dbus-system-policy-dir) DBUS_POLICY_DIR=${2:?$1 needs a value}; shift 2 ;;
        --dbus-system-services-dir) DBUS_SERVICES_DIR=${2:?$1 needs a value}; shift 2 ;;
        --polkit-actions-dir) POLKIT_DIR=${2:?$1 needs a value}; shift 2 ;;
        --systemd-unit-dir) UNIT_DIR=${2:?$1 needs a value}; shift 2 ;;
        --build-dir) [ "$(basename "$0")" = install ] || { usage >&2; exit 2; }
                     BUILD_DIR=${2:?--build-dir needs a value}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$(basename "$0"): unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done

for dir in "$PREFIX" "$SYSCONFDIR" "$LOCALSTATEDIR"; do
    case "$dir" in /*) ;; *) echo "$(basename "$0"): $dir: not an absolute path" >&2; exit 2 ;; esac
done
PREFIX=${PREFIX%/}; SYSCONFDIR=${SYSCONFDIR%/}; LOCALSTATEDIR=${LOCALSTATEDIR%/}
[ -n "$PREFIX" ] || PREFIX=/

pkgvar() {  # pkgvar PACKAGE VARIABLE: empty when the package's .pc is missing
    pkg-config --variable="$2" "$1" 2>/dev/null || true
}
if [ -z "$DBUS_POLICY_DIR" ]; then
    datadir=$(pkgvar dbus-1 datadir)
    DBUS_POLICY_DIR=${datadir:-/usr/share}/dbus-1/system.d
fi
if [ -z "$DBUS_SERVICES_DIR" ]; then
    DBUS_SERVICES_DIR=$(pkgvar dbus-1 system_bus_services_dir)
    DBUS_SERVICES_DIR=${DBUS_SERVICES_DIR:-/usr/share/dbus-1/system-services}
fi
if [ -z "$POLKIT_DIR" ]; then
    POLKIT_DIR=$(pkgvar polkit-gobject-1 policydir)
    POLKIT_DIR=${POLKIT_DIR:-/usr/share/polkit-1/actions}
fi
if [ -z "$UNIT_DIR" ]; then
    UNIT_DIR=$(pkgvar systemd systemdsystemunitdir)
    UNIT_DIR=${UNIT_DIR:-/lib/systemd/system}
fi

LIBEXEC_DIR=$PREFIX/libexec
BIN_DIR=$PREFIX/bin
# The Swift runtime the installed programs share, and the plugins below it.
LIB_DIR=$PREFIX/lib/permissions
PLUGIN_DIR=$LIB_DIR/plugins
INCLUDE_DIR=$PREFIX/include/permissions
PKGCONFIG_DIR=$PREFIX/lib/pkgconfig
SHARE_DIR=$PREFIX/share/permissions
INTERFACES_DIR=$PREFIX/share/dbus-1/interfaces
MAN_DIR=$PREFIX/share/man
CONFIG_DIR=$SYSCONFDIR/permissions
STATE_DIR=$LOCALSTATEDIR/lib/permissions
MANIFEST=$SHARE_DIR/install-manifest
