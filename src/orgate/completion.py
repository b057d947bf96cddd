"""Shell completion scripts for ``orgate``, generated from its argparse tree (so a new command or
option completes without editing a script): ``orgate completion bash|zsh|fish``.

Each script holds one table, "command path → words that may follow" (sub-commands, options and
the choices of positional arguments); the shell finds the longest known path in the words typed.
"""

from __future__ import annotations

import argparse
import shlex


def _words(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, argparse.ArgumentParser]]:
    """The words that may follow ``parser``'s command, and its sub-commands' parsers by name."""
    words: list[str] = []
    children: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                words.append(name)
                children[name] = child
        elif action.option_strings:
            words += [
                o for o in action.option_strings if o.startswith("--")
            ] or action.option_strings
        elif action.choices:
            words += [str(c) for c in action.choices]
    return words, children


def command_table(parser: argparse.ArgumentParser, path: str = "orgate") -> dict[str, list[str]]:
    """Every command path (``"orgate"``, ``"orgate store"``, ``"orgate store prune"``...) → the
    words that may follow."""
    words, children = _words(parser)
    table = {path: words}
    for name, child in children.items():
        table.update(command_table(child, f"{path} {name}".strip()))
    return table


_BASH = """\
# orgate completion for bash: `source <(orgate completion bash)`
declare -gA _orgate_words=(
{entries}
)
_orgate() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} path=orgate next i
    for ((i = 1; i < COMP_CWORD; i++)); do
        next="$path ${{COMP_WORDS[i]}}"
        [[ -n ${{_orgate_words[$next]+set}} ]] && path=$next
    done
    COMPREPLY=($(compgen -W "${{_orgate_words[$path]}}" -- "$cur"))
}}
complete -o default -F _orgate orgate
"""

_ZSH = """\
# orgate completion for zsh: `source <(orgate completion zsh)`
autoload -U +X bashcompinit && bashcompinit
"""

_FISH = """\
# orgate completion for fish: `orgate completion fish | source`
function __orgate_path
    set -l known {paths}
    set -l path orgate
    for word in (commandline -opc)[2..-1]
        set -l next "$path $word"
        if contains -- $next $known
            set path $next
        end
    end
    echo $path
end
{lines}
"""


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    table = command_table(parser)
    if shell == "fish":
        paths = " ".join(shlex.quote(p) for p in table)
        lines = [
            "complete -c orgate -f -n "
            f"{shlex.quote(f'test (__orgate_path) = {shlex.quote(path)}')} -a "
            f"{shlex.quote(' '.join(words))}"
            for path, words in table.items()
        ]
        return _FISH.format(paths=paths, lines="\n".join(lines))
    entries = "\n".join(
        f"    [{shlex.quote(path)}]={shlex.quote(' '.join(words))}" for path, words in table.items()
    )
    bash = _BASH.format(entries=entries)
    return _ZSH + bash if shell == "zsh" else bash
