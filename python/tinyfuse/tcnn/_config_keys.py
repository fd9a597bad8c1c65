"""Config keys no object reads: warnings, once per key.

Configs handed to tinyfuse.tcnn are often shared with the caller's own code, which keeps keys of
its own in them (instant-nsr-pl's ``include_xyz``, threestudio's ``start_level``, ``start_step``,
``update_steps``); tinycudann ignores what it does not read. The C++ side decides what is unknown
(BuildOptions::ignored_keys) and hands each key back as the ConfigError it would have raised;
here each becomes one warning per process. ``strict=True`` on a module keeps them errors.
"""

import warnings


class IgnoredConfigKeyWarning(UserWarning):
    """A config key tinyfuse does not read was ignored (``strict=True`` makes it a ConfigError)."""


_warned = set()


def warn_ignored(owner, ignored, stacklevel):
    """`ignored`: (key path, value, rule, accepted) tuples from the native factory."""
    for key, value, rule, accepted in ignored:
        if key in _warned:
            continue
        _warned.add(key)
        warnings.warn(f"{owner}: config key \"{key}\" = {value} is ignored: {rule}; keys read here: {accepted}. "
                      "(tinycudann ignores keys it does not read; pass strict=True to make this an error)",
                      IgnoredConfigKeyWarning, stacklevel=stacklevel + 1)


def forget_warnings():
    """Warn again about keys already warned about (for tests)."""
    _warned.clear()
