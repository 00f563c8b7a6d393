"""A Hugging Face chat template (``chat_template`` of ``tokenizer_config.json``, a Jinja string)
reduced to the 8 strings etch's chat runner concatenates, stored in the ``.pte`` as the
metadata method ``get_chat_template`` (8 String outputs, in this order):

    0 conversation_prefix   text before the first message (e.g. the BOS text)
    1 system_prefix         2 system_suffix
    3 user_prefix           4 user_suffix
    5 assistant_prefix      the generation prompt (also what opens an assistant turn)
    6 assistant_suffix      what closes an assistant turn
    7 default_system        the system text the template inserts when none is given, else ""

A conversation is then::

    conversation_prefix
    + (system_prefix + SYSTEM + system_suffix   if a system text is given,
       system_prefix + default_system + system_suffix   else if default_system != "")
    + for each turn: user_prefix + USER + user_suffix
                     + assistant_prefix + REPLY + assistant_suffix
    + for the turn to generate: user_prefix + USER + user_suffix + assistant_prefix

The strings are derived by rendering the template with sentinel messages (Jinja2 in a
sandbox, with Hugging Face's ``raise_exception``, ``strftime_now`` and ``tojson`` and the
special tokens of tokenizer_config.json), then checked: the concatenation must equal the
template's own rendering exactly for conversations of one to three turns with and without a
system message.  A template that is not of this form (e.g. Llama 2's ``[INST] <<SYS>>``, which
folds the system text into the first user turn) gets no strings and a reason instead.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Dict, List, Optional, Tuple

__all__ = ["ChatTemplate", "derive", "load_template", "compose", "render", "FIELDS"]

FIELDS = ("conversation_prefix", "system_prefix", "system_suffix", "user_prefix",
          "user_suffix", "assistant_prefix", "assistant_suffix", "default_system")

ChatTemplate = Tuple[str, str, str, str, str, str, str, str]


class TemplateUnsupported(ValueError):
    pass


def _token_text(v) -> Optional[str]:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]       # an AddedToken as tokenizer_config.json stores it
    return None


def load_template(d: str) -> Tuple[Optional[str], Dict[str, str]]:
    """(the chat template of DIR or None, the special tokens' texts of tokenizer_config.json).
    DIR/chat_template.jinja, where present, is the template (newer transformers write it)."""
    tc: dict = {}
    p = os.path.join(d, "tokenizer_config.json")
    if os.path.isfile(p):
        try:
            with open(p, "rb") as f:
                tc = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ValueError("%s: not valid JSON (%s)" % (p, e)) from None
        if not isinstance(tc, dict):
            raise ValueError("%s: expected a JSON object" % p)
    special = {}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        t = _token_text(tc.get(k))
        if t is not None:
            special[k] = t
    tpl = tc.get("chat_template")
    if isinstance(tpl, list):       # named templates: the default one
        named = {t.get("name"): t.get("template") for t in tpl if isinstance(t, dict)}
        tpl = named.get("default")
    jp = os.path.join(d, "chat_template.jinja")
    if os.path.isfile(jp):
        with open(jp, "rb") as f:
            tpl = f.read().decode("utf-8")
    if tpl is not None and not isinstance(tpl, str):
        raise ValueError("%s: chat_template must be a string" % p)
    return tpl, special


def _environment():
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ImportError("the chat template needs Jinja2 (Debian: apt-get install "
                          "python3-jinja2)") from None

    def raise_exception(msg):
        raise TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template: str, messages: List[dict], add_generation_prompt: bool,
           special: Dict[str, str]) -> str:
    """The template's text for `messages` (what transformers' apply_chat_template renders)."""
    env = _environment()
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=add_generation_prompt,
                                            **special)


def compose(t: ChatTemplate, system: Optional[str], turns: List[Tuple[str, str]],
            user: Optional[str]) -> str:
    """The conversation as the 8 strings make it: `turns` (user, reply) pairs, then `user` to
    be answered (the generation prompt follows it), or None (the text ends after the last
    reply)."""
    P, sp, ss, up, us, ap, as_, D = t
    out = P
    if system is not None:
        out += sp + system + ss
    elif D:
        out += sp + D + ss
    for u, a in turns:
        out += up + u + us + ap + a + as_
    if user is not None:
        out += up + user + us + ap
    return out


def _split(text: str, *sentinels: str) -> List[str]:
    """text around the sentinels, each of which must occur exactly once, in order."""
    parts, rest = [], text
    for s in sentinels:
        if rest.count(s) != 1:
            raise TemplateUnsupported("the message text %r appears %d times in the rendering"
                                      % (s, rest.count(s)))
        a, rest = rest.split(s)
        parts.append(a)
    parts.append(rest)
    return parts


def _msgs(system, turns, user):
    m = [] if system is None else [{"role": "system", "content": system}]
    for u, a in turns:
        m += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    if user is not None:
        m.append({"role": "user", "content": user})
    return m


def derive(template: str, special: Dict[str, str]) -> Tuple[Optional[ChatTemplate], str]:
    """(the 8 strings, "") or (None, why the template cannot be expressed by them)."""
    from jinja2.exceptions import TemplateError

    def R(system, turns, user, gen=None):
        return render(template, _msgs(system, turns, user),
                      user is not None if gen is None else gen, special)

    U1, U2, A1, S_ = "EtchUserOne", "EtchUserTwo", "EtchReplyOne", "EtchSystemText"
    try:
        r1 = R(None, [], U1, gen=False)
        r1g = R(None, [], U1)
        if not r1g.startswith(r1):
            raise TemplateUnsupported("the generation prompt is not appended at the end")
        ap = r1g[len(r1):]
        head, tail = _split(r1, U1)
        r2 = R(None, [(U1, A1)], None)
        _, mid, as_ = _split(r2, U1, A1)
        if not mid.endswith(ap):
            raise TemplateUnsupported("a reply in the history does not open with the "
                                      "generation prompt %r" % ap)
        us = mid[:len(mid) - len(ap)]
        if tail != us:
            raise TemplateUnsupported("the user turn ends differently before a reply")
        r3 = R(None, [(U1, A1)], U2)
        _, _, mid2, _ = _split(r3, U1, A1, U2)
        if not mid2.startswith(as_):
            raise TemplateUnsupported("a reply is closed differently before the next turn")
        up = mid2[len(as_):]
        if not head.endswith(up):
            raise TemplateUnsupported("the first user turn opens differently from the others")
        X = head[:len(head) - len(up)]
        try:
            rs = R(S_, [], U1, gen=False)
        except TemplateError as e:
            raise TemplateUnsupported("the template refuses a system message (%s)" % e)
        head_s, mid_s, _ = _split(rs, S_, U1)
        if not mid_s.endswith(up):
            raise TemplateUnsupported("the system message is not followed by the user turn")
        ss = mid_s[:len(mid_s) - len(up)]
        if head_s.startswith(X):            # no default system: X is the prefix alone
            P, D = X, ""
        elif X.startswith(head_s) and X.endswith(ss) and len(X) >= len(head_s) + len(ss):
            D = X[len(head_s):len(X) - len(ss)]
            P = ""                           # split head_s at the BOS text where it has one
            bos = special.get("bos_token") or ""
            if bos and head_s.startswith(bos):
                P = bos
        else:
            raise TemplateUnsupported("the text before the first message depends on the "
                                      "system message in a way the strings cannot express")
        sp = head_s[len(P):]
        t: ChatTemplate = (P, sp, ss, up, us, ap, as_, D)
        # the check: the strings must give the template's own text, with other message texts
        texts = ("Hello there", "How are you?", "Fine, thanks.", "Be brief.", "More.", "Ok.")
        for system in (None, texts[3]):
            for turns, user in (([], texts[0]), ([(texts[0], texts[2])], texts[1]),
                                ([(texts[0], texts[2]), (texts[1], texts[5])], texts[4]),
                                ([(texts[0], texts[2])], None)):
                want = R(system, turns, user)
                got = compose(t, system, turns, user)
                if got != want:
                    raise TemplateUnsupported(
                        "the strings do not reproduce the template (%s system, %d turns): "
                        "template %r, strings %r" % ("with" if system else "without",
                                                     len(turns) + (user is not None),
                                                     want, got))
    except TemplateUnsupported as e:
        return None, str(e)
    except TemplateError as e:
        return None, "the template failed to render (%s)" % e
    return t, ""


def strips_text(template: str, special: Dict[str, str]) -> bool:
    """Whether the template changes a message's surrounding whitespace (e.g. Llama 3's
    ``| trim``): etch's strings carry the text as given."""
    try:
        r = render(template, _msgs(None, [], " EtchSpaced\n"), True, special)
    except Exception:   # noqa: BLE001 - only a note
        return False
    return " EtchSpaced\n" not in r
