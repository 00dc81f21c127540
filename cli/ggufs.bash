# bash completion for ggufs(1): the commands, their options, -o's
# options, and the KEY names of a model for get and set (read from the
# file's header by `ggufs ls`, which parses the header only: fast on a
# 262k-token vocabulary).  Installed as
# /usr/share/bash-completion/completions/ggufs.

_ggufs_keys() {
    # $1: the model file; the names of meta/ (meta.tsv's first column)
    ggufs ls "$1" 2>/dev/null | tail -n +2 | cut -f1
}

_ggufs() {
    local cur prev words cword
    _init_completion -n =: || return
    local cmds="get set ls tensors -u --status --recover --apply-pending
        --drop-pending --show-pending --apply-saved --compact --overlay-apply
        --overlay-drop --overlay-rebase --help --version"
    local mount_opts="ro overlay overlay= allow_other default_permissions
        allow_nested no_insert_range timeout= max_value= max_drafts=
        passthrough= tensor_direct_io ggml= cache= cache_max= header=
        net_timeout= net_retries= max_header= s3_path_style= mix= store=
        max_models= over"
    local edit_opts="overlay overlay= allow_nested ggml= max_value="
    if [[ $prev == -o ]]; then
        case ${words[1]} in
            get|set|ls|tensors) COMPREPLY=($(compgen -W "$edit_opts" -- "$cur")) ;;
            *) COMPREPLY=($(compgen -W "$mount_opts" -- "$cur")) ;;
        esac
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
        return
    fi
    if ((cword == 1)); then
        COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
        [[ $cur != -* ]] && COMPREPLY+=($(compgen -f -X '!*.gguf' -- "$cur"))
        return
    fi
    # The model: the first argument after the command that is not -o X.
    local i file=
    for ((i = 2; i < cword; i++)); do
        [[ ${words[i]} == -o ]] && { ((i++)); continue; }
        [[ ${words[i]} == --remove ]] && continue
        file=${words[i]}
        break
    done
    case ${words[1]} in
        get|set)
            if [[ -z $file ]]; then
                _filedir gguf
                return
            fi
            if [[ ${words[1]} == set && $cur == *=@* ]]; then
                local pre=${cur%%=@*}=@
                cur=${cur#*=@}
                _filedir
                COMPREPLY=("${COMPREPLY[@]/#/$pre}")
                return
            fi
            local keys
            keys=$(_ggufs_keys "$file")
            if [[ ${words[1]} == set && $prev != --remove ]]; then
                COMPREPLY=($(compgen -W "$keys" -S = -- "$cur") \
                    $(compgen -W "--remove" -- "$cur"))
                compopt -o nospace
            else
                COMPREPLY=($(compgen -W "$keys" -- "$cur"))
            fi
            ;;
        ls|tensors|--recover|--apply-pending|--drop-pending|--show-pending|--compact)
            _filedir gguf ;;
        -u|--status)
            _filedir -d ;;
        *)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-o -f -d --help" -- "$cur")) || _filedir ;;
    esac
}
complete -F _ggufs ggufs
