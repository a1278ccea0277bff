# Sourced by the plugin's launchers: sets TALK_PYTHON, the interpreter talk is installed in.
#
# Order: the environment; then talk.env beside scripts/ (written by `talk install claude`, which
# also records TALK_HOME and TALK_USER there, each used only when the environment has none);
# then the interpreter named on the first line of the `talk` script found on PATH (a plugin
# installed from the marketplace has no talk.env). Never `python3` from PATH: it may be a
# pyenv shim, which costs ~100 ms on every agent turn.
talk_env="$(dirname "${BASH_SOURCE[0]}")/../talk.env"
if [ -r "$talk_env" ]; then
    while IFS='=' read -r key value || [ -n "$key" ]; do
        case "$key" in
            TALK_PYTHON|TALK_HOME|TALK_USER)
                if [ -z "${!key:-}" ]; then export "$key=$value"; fi ;;
        esac
    done < "$talk_env"
fi
if [ -z "${TALK_PYTHON:-}" ] && talk_bin="$(command -v talk)"; then
    shebang=""
    IFS= read -r shebang < "$talk_bin" || true
    case "$shebang" in
        '#!/'*) shebang="${shebang#\#!}"; TALK_PYTHON="${shebang%% *}" ;;
    esac
fi
talk_python_ok() {
    [ -n "${TALK_PYTHON:-}" ] && [ -x "$TALK_PYTHON" ]
}
