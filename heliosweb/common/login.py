"""The login form: Django's, with its username's length enforced. `AuthenticationForm` sets
`max_length` on the widget only: a 300-character name reached `authenticate`, the audit and axes'
records, whose columns PostgreSQL enforces (a 500, no account needed). Here it is a form error at
the field; a NUL is refused the same way.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


class LoginForm(AuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].validators.append(MaxLengthValidator(self.username_field.max_length or 254))
