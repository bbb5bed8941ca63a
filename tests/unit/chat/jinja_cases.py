#!/usr/bin/env python3
"""Generates jinja_cases.h for test_jinja.c: each case's expected text comes from Python's
Jinja2 configured like Hugging Face (oracle.py's make_env), so the C interpreter is checked
against the reference rather than against what someone believed Jinja2 does.

  python3 tests/unit/chat/jinja_cases.py ../shared/chat-templates > tests/unit/chat/jinja_cases.h
  clang-format -i tests/unit/chat/jinja_cases.h
"""
import json
import os
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "../shared/chat-templates")
import oracle  # noqa: E402

CTX = {"s": "Hello World", "n": 3, "f": 2.5, "l": ["a", "b", "c"], "d": {"x": 1, "y": "two"},
       "e": [], "none": None, "t": True, "u": "Grüße 你好 🙂", "msgs": [
           {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
           {"role": "user", "content": "bye"}],
       "nums": [3, 1, 2], "words": ["b", "A", "c", "a"], "nested": {"a": {"b": [1, {"c": "deep"}]}}}

CASES = [
    # printing
    "{{ none }}|{{ t }}|{{ false }}|{{ n }}|{{ f }}|{{ 1.0 }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 1e-5 }}",
    "{{ l }}|{{ d }}|{{ (1, 'a') }}|{{ (1,) }}|{{ [none, true, 1.5] }}|{{ {'k': [1, {'z': none}]} }}",
    "{{ [\"it's\"] }}|{{ ['say \"hi\"'] }}|{{ ['both \\' \"'] }}|{{ ['tab\\tnl\\n\\\\'] }}",
    "{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 7.5 // 2 }}",
    "{{ 10 / 5 }}|{{ 3 * 'ab' }}|{{ [1] * 3 }}|{{ 'a' ~ 1 ~ none ~ undefined_x }}|{{ 1 + 2.0 }}",
    # tojson
    "{{ d | tojson }}|{{ l | tojson }}|{{ u | tojson }}|{{ none | tojson }}|{{ f | tojson }}",
    "{{ nested | tojson(indent=2) }}",
    "{{ d | tojson(sort_keys=true) }}|{{ {'b': 1, 'a': [1, 2]} | tojson(separators=(',', ':')) }}",
    "{{ 'quote \" back \\\\ nl \\n ctl \x01' | tojson }}",
    # loops
    "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
    "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for x in l %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('o', 'e') }}]{% endfor %}",
    "{% for x in e %}no{% else %}empty{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}",
    "{% for x in nums if x > 1 %}{{ x }}{{ loop.index }}{{ loop.last }} {% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in range(2, 11, 3) %}{{ x }},{% endfor %}{% for x in range(3, 0, -1) %}{{ x }}{% endfor %}",
    "{% set x = 5 %}{% for i in range(3) %}{% if i == 1 %}{% set x = 1 %}{% endif %}[{{ x }}]{% endfor %}{{ x }}",
    "{% for m in msgs %}{{ m.role }}:{{ m['content'] }}{% if not loop.last %}, {% endif %}{% endfor %}",
    # namespace, set, macros
    "{% set ns = namespace(c=0, s='') %}{% for x in l %}{% set ns.c = ns.c + 1 %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.c }}{{ ns.s }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[0] }}{% set c %}cap {{ n }}{% endset %}[{{ c }}]",
    "{% set c | upper %}lower text{% endset %}{{ c }}",
    "{% macro m(x, y='def') %}<{{ x }}|{{ y }}>{% endmacro %}{{ m(1) }}{{ m(2, 'z') }}{{ m(y=3, x=4) }}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}",
    "{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}inside {{ n }}{% endcall %}",
    "{% filter upper %}shout {{ s }}{% endfilter %}",
    # slices and indexes
    "{{ s[0] }}{{ s[-1] }}{{ s[1:4] }}{{ s[::-1] }}{{ s[::2] }}{{ l[1:] }}{{ l[:-1] }}{{ l[-2] }}",
    "{{ u[0] }}{{ u[-1] }}{{ u[6:8] }}{{ u | length }}{{ u[::-1] }}",
    "{{ nested.a.b[1].c }}{{ d['x'] }}{{ d.y }}{{ l.0 }}",
    # whitespace control with trim/lstrip blocks
    "a\n  {% if t %}\n    b\n  {% endif %}\nc",
    "a\n  {%- if t -%}\n    b\n  {%+ endif %}\nc  {{- 'd' -}}  e\n{# comment #}\nf",
    "x {%- if t +%}\n  y\n{%- endif %} z",
    "  {{ s }}  \n  {% for x in l %}\n  {{ x }}\n  {% endfor %}\nend\n",
    "{% if t %}yes{% elif n %}n{% else %}no{% endif %}|{% if none %}a{% elif n == 3 %}b{% endif %}",
    # string methods and filters
    "{{ '  pad  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  l'.lstrip() }}|{{ 'r  '.rstrip() }}|{{ 'abcab'.rstrip('ab') }}",
    "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}",
    "{{ s.startswith('Hell') }}{{ s.endswith(('x', 'ld')) }}{{ s.replace('l', 'L') }}{{ s.replace('l', '', 2) }}",
    "{{ s.upper() }}{{ s.lower() }}{{ 'hello big world'.title() }}{{ 'hELLO'.capitalize() }}{{ s.find('o') }}{{ s.count('l') }}",
    "{{ '-'.join(l) }}|{{ l | join(', ') }}|{{ msgs | map(attribute='role') | join('/') }}",
    "{{ l | length }}{{ s | length }}{{ d | length }}{{ l | first }}{{ l | last }}{{ s | first }}",
    "{{ undefined_x | default('dflt') }}|{{ '' | default('e', true) }}|{{ '' | default('e') }}|{{ none | default('n') }}",
    "{{ '  t  ' | trim }}|{{ 'xx t xx' | trim('x') }}|{{ s | upper }}|{{ s | lower }}|{{ 'ab cd' | title }}|{{ 'ab' | capitalize }}",
    "{{ s | replace('o', '0') }}|{{ 'abc' | list }}|{{ 42 | string }}|{{ '12' | int + 1 }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ -3 | abs }}",
    "{{ 2.567 | round(2) }}|{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.1 | round(0, 'ceil') }}|{{ 7 | round }}",
    "{{ d | items | list }}|{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(reverse=true) }}",
    "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
    "{{ msgs | rejectattr('role', 'eq', 'user') | list | length }}|{{ nums | select('odd') | list }}|{{ nums | reject('odd') | list }}",
    "{{ [none, 1, 0, 'a'] | select | list }}|{{ l | map('upper') | list }}|{{ ['a', 'A', 'b'] | unique | list }}",
    "{{ nums | sort }}|{{ words | sort }}|{{ words | sort(case_sensitive=true) }}|{{ nums | sort(reverse=true) }}|{{ msgs | sort(attribute='content') | map(attribute='content') | join }}",
    "{{ msgs | unique(attribute='role') | map(attribute='content') | join(',') }}|{{ [{'k': 'A'}, {'k': 'a'}] | unique(attribute='k', case_sensitive=true) | list | length }}|{{ (msgs | min(attribute='content')).content }}|{{ (msgs | max(attribute='content')).content }}|{{ [{'v': 1}, {'v': 2.5}] | sum(attribute='v') }}|{{ [{'v': 1}, {'v': 2}] | sum(attribute='v', start=10) }}",
    "{{ l | reverse | list }}|{{ s | reverse }}|{{ nums | sum }}|{{ nums | min }}|{{ nums | max }}|{{ words | max }}",
    "{{ 'line1\\nline2\\n\\nline4' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}",
    "{{ 'one two  three' | wordcount }}|{{ '<b>x</b> <i>y</i>' | striptags }}|{{ '<a href=\"x\">&' | e }}|{{ 'x' | safe }}",
    "{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ [1, 2, 3, 4, 5] | slice(2) | list }}|{{ 'ab' | center(6) }}|{{ 'hello world foo' | truncate(9, leeway=0) }}",
    "{{ d | attr('x') }}|{{ l | count }}|{{ msgs | map(attribute='missing', default='-') | join }}",
    # tests
    "{{ n is defined }}{{ zz is defined }}{{ zz is undefined }}{{ none is none }}{{ s is string }}{{ n is number }}{{ t is number }}",
    "{{ n is integer }}{{ f is float }}{{ t is integer }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is iterable }}{{ n is iterable }}",
    "{{ l is sequence }}{{ t is boolean }}{{ t is true }}{{ t is false }}{{ n is odd }}{{ n is even }}{{ 9 is divisibleby 3 }}",
    "{{ n is eq 3 }}{{ n is equalto 4 }}{{ n is ne 4 }}{{ n is lt 4 }}{{ n is gt 4 }}{{ n is le 3 }}{{ n is ge 4 }}{{ 'a' is in l }}",
    "{{ none is sameas none }}{{ m is callable }}{{ range is callable }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ n is not none }}",
    # operators and logic
    "{{ 1 < n <= 3 }}{{ 3 > n }}{{ 'b' in l }}{{ 'z' not in l }}{{ 'ell' in s }}{{ 'x' in d }}{{ [1] == [1] }}{{ 1 == 1.0 }}{{ t == 1 }}",
    "{{ none or 'fb' }}|{{ 0 and 'x' }}|{{ 'a' and 'b' }}|{{ not e }}|{{ 'y' if t else 'n' }}|{{ 'y' if none }}|",
    "{{ -n }}{{ +n }}{{ - -n }}{{ (n + 1) * 2 }}{{ n - 1 - 1 }}{{ 2 ** 3 ** 2 }}{{ 'a' + 'b' }}{{ l + ['d'] }}",
    "{{ d.get('x') }}|{{ d.get('zz') }}|{{ d.get('zz', 'dflt') }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.items() | list }}",
    "{{ dict(a=1, b='x') }}|{{ namespace(a=1).a }}|{{ {'a': 1}.a }}|{{ d.missing }}|{{ none.attr }}|{{ s.nope }}",
    # undefined behaviour
    "[{{ zz }}][{{ zz | length }}][{% for x in zz %}x{% endfor %}][{{ zz | upper }}][{{ zz is none }}][{% if zz %}t{% else %}f{% endif %}]",
    # generators (|map, |select ...) and Markup (|safe, |e) as Python has them
    "{% if e | select %}gen-true{% endif %}|{{ (l | map('upper') | list)[0] }}|{{ (l | map('upper'))[0] }}|{{ l | reverse | join }}",
    "{{ 'a' | safe + '<b>' }}|{{ '<' + 'x' | safe }}|{{ ('<' | e) + '>' }}|{{ '<x>' | e | e }}|{{ '\"q\"' | forceescape }}",
    "{{ l | map('upper') | tojson }}",
    "{{ l | select | length }}",
    "{{ d | items | length }}",
    # raw blocks, % and str.format, |title
    "a\n  {% raw %}\n  {{ x }} {% if %}\n  {% endraw %}\nb",
    "a {%- raw -%}  x  {%- endraw -%} b|{% raw %}{{ y }}{% endraw %}z",
    "{{ '%s=%d %5.2f|%-4s|%04d %r %%' % ('a', 3.9, 2.345, 'b', 7, 'q') }}|{{ '%s!' % 'x' }}{{ '%s' % [1] }}",
    "{{ '%x %X %o %e %g %+d %.3s' % (255, 255, 8, 1234.5, 0.0001, 5, 'abcdef') }}|{{ '%(a)s-%(b)d' % {'a': 1, 'b': 2} }}",
    "{{ '{} {}'.format(1, 'a') }}|{{ '{1}{0}{{}}'.format('x', 'y') }}|{{ '{name}!r={name!r}'.format(name='n') }}",
    "{{ 'hello-world they\\'re (x y' | title }}|{{ \"they're\".title() }}",
    "{{ '%s %s' % ('a',) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}",
    "{{ range(9223372036854775800, 9223372036854775807, 5) | list }}{{ range(-9223372036854775807, -9223372036854775806 - 2, -5) | list }}",
    "{{ range(5) | list }}{{ range(1, 10, 3) | list }}{{ range(10, 1, -3) | list }}{{ range(3, 3) | list }}{{ range(0, -7, -2) | list }}",
    "{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ d.keys() | length }}|{{ 'x' in d.keys() }}|{{ d.items() | list }}",
    "{{ d.items() | tojson }}",
    "{{ u | tojson(ensure_ascii=true) }}|{{ {'\u00fc': 'x\x7f\u20ac'} | tojson(true) }}|{{ u | tojson(false, 1) }}",
    # found by comparing random expressions with Python
    "{{ 1 // 0.1 }}|{{ -7.5 // 2 }}|{{ 7.5 % -2 }}|{{ 5 % 0.3 }}|{{ 1.5 is odd }}|{{ -1.0 is odd }}|{{ 3.0 is divisibleby 1.5 }}|{{ '' % [1] }}|{{ '' % {'a': 1} }}",
    "{{ d[1:] }}",
    "{{ n[1:] }}",
    "{{ 'x' % 1 }}",
    "{{ t | indent }}",
    "{{ zz | int }}",
    "{{ true * d.keys() }}",
    "{{ u.upper() }}|{{ u | lower }}|{{ 'ÀÉÎ àéî ÿ ß µ ı'.title() }}|{{ 'Ελληνικά ΑΒΓ άέ ς' | upper }}|{{ 'Русский ТЕКСТ ёЁ' | title }}|{{ 'ß' | capitalize }}",
    "{{ 'they\\'re 1st o\\'neil-smith' | title }}|{{ 'they\\'re 1st o\\'neil-smith'.title() }}|{{ '你好world'.title() }}",
    "{{ ('x' | items) is number }}|{{ (1 | select) is defined }}|{% if n | map('upper') %}lazy{% endif %}",
    "{% for x in 1 | select %}{% endfor %}",
    # found by comparing random statements with Python
    "{% for x in l %}{% for y in d %}{% continue %}{% else %}E{% endfor %}{% endfor %}|{% for x in l %}{% if loop.first %}{% break %}{% endif %}{% else %}F{% endfor %}|{% for x in l %}{% if loop.last %}{% break %}{% endif %}{% else %}G{% endfor %}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m }}|{{ m | length }}",
    "{% if t %}{% break %}{% endif %}",
    "{% for x in l %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}",
    "{% for x in l %}{% filter upper %}a{% break %}{% endfilter %}{% else %}E{% endfor %}|{% for x in l %}{% set b %}{{ x }}{% continue %}{% endset %}{{ b }}{% endfor %}|{{ (1, 2) < (1, 3) }}",
    "{{ (1, 2) < [1, 3] }}",
    # date
    "{{ strftime_now('%Y-%m-%d %d %b %B %A %H') }}",
    # raising
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}",
    "{{ zz.attr }}",
    "{{ zz + 'x' }}",
    "{{ 1 + 'a' }}",
    "{{ 1 / 0 }}",
    "{{ l.append(1) }}",
    "{{ s | nosuchfilter }}",
    "{{ none | list }}",
]


def c_str(s):
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif b < 0x20 or b >= 0x7f or c == "?":
            out.append("\\%03o" % b)
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def main():
    oracle.NOW = oracle.datetime.datetime(2026, 11, 24, 12, 0)
    print("/* Generated by jinja_cases.py from Python Jinja2 (oracle.py's environment); do not edit. */")
    print("static const char jinja_ctx_json[] = %s;" % c_str(json.dumps(CTX, ensure_ascii=False)))
    print("static const struct jcase {\n    const char *tmpl, *want, *err; /* want NULL: must fail with err */\n} jinja_cases[] = {")
    for src in CASES:
        try:
            want = oracle.make_env().from_string(src).render(**CTX)
            print("    {%s, %s, NULL}," % (c_str(src), c_str(want)))
        except Exception as e:  # noqa: BLE001
            print("    {%s, NULL, %s}," % (c_str(src), c_str("%s: %s" % (type(e).__name__, e))))
    print("};")


if __name__ == "__main__":
    main()
