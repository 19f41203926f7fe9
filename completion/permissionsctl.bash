# bash completion for permissionsctl                                -*- shell-script -*-
#
# Completes subcommands and options, permission names (from the running service's
# Permissions property, on the bus the command line names) and app ids (from your
# stored decisions, `permissionsctl list`). Installed by scripts/install to
# PREFIX/share/bash-completion/completions/permissionsctl.

# The bus options given so far, for the calls that fetch names.
__permissionsctl_bus() {
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --system|--session) printf '%s\n' "${COMP_WORDS[i]}" ;;
            --address) printf '%s\n' --address "${COMP_WORDS[i + 1]}" ;;
            --address=*) printf '%s\n' "${COMP_WORDS[i]}" ;;
        esac
    done
}

# The service's permission names; nothing if it does not answer within 2 s.
__permissionsctl_permissions() {
    local -a bus=() busctl=()
    mapfile -t bus < <(__permissionsctl_bus)
    case "${bus[0]}" in
        --session) busctl=(--user) ;;
        --address) busctl=("--address=${bus[1]}") ;;
        --address=*) busctl=("${bus[0]}") ;;
    esac
    busctl "${busctl[@]}" --timeout=2 get-property org.example.Permissions /org/example/Permissions \
        org.example.Permissions Permissions 2>/dev/null | tr ' ' '\n' | sed -n 's/^"\(.*\)"$/\1/p'
}

# App ids of your stored decisions (every user's with an admin's --all).
__permissionsctl_apps() {
    local -a bus=()
    mapfile -t bus < <(__permissionsctl_bus)
    timeout 2 "${COMP_WORDS[0]}" "${bus[@]}" list 2>/dev/null | awk 'NR > 1 { print $1 }' | sort -u
}

_permissionsctl() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} cword=$COMP_CWORD
    fi
    local commands="status get list grant deny reset assign request monitor agent plugins remotes doctor settings help"
    local global="--system --session --address --help --version"

    case "$prev" in
        --address) return ;;
        --user) mapfile -t COMPREPLY < <(compgen -u -- "$cur"); return ;;
        --reason|--parent-window) return ;;
    esac

    # The subcommand: the first word that is neither an option nor --address's value.
    local i command="" first=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --address) ((i++)) ;;
            -*) ;;
            *) command=${COMP_WORDS[i]} first=$i; break ;;
        esac
    done
    if [[ -z "$command" ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$([[ "$cur" == -* ]] && echo "$global" || echo "$commands")" -- "$cur")
        return
    fi

    # Positional arguments of the subcommand so far (options and their values skipped).
    local -a args=()
    for ((i = first + 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --user|--reason|--parent-window) ((i++)) ;;
            -*) ;;
            *) args+=("${COMP_WORDS[i]}") ;;
        esac
    done

    local options=""
    case "$command" in
        status|plugins|remotes) options="--json" ;;
        get|grant|deny) options="--user" ;;
        list) options="--user --all --json" ;;
        reset) options="--user --unassigned" ;;
        request) options="--reason --parent-window" ;;
        monitor) options="--broadcast --json" ;;
    esac
    if [[ "$cur" == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
        return
    fi

    local words_now=""
    case "$command:${#args[@]}" in
        status:0|request:*) words_now=$(__permissionsctl_permissions) ;;
        get:0|grant:0|deny:0|list:0|reset:0|assign:0|settings:0) words_now=$(__permissionsctl_apps) ;;
        get:1|grant:1|deny:1|settings:1) words_now=$(__permissionsctl_permissions) ;;
        reset:*) words_now=$(__permissionsctl_permissions) ;;
        assign:1) mapfile -t COMPREPLY < <(compgen -u -- "$cur"); return ;;
        assign:*) words_now=$(__permissionsctl_permissions) ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$words_now" -- "$cur")
}

complete -F _permissionsctl permissionsctl
