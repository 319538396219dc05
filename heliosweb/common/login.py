"""The login form: Django's, with its username's length enforced.

`AuthenticationForm` states the user model's `max_length` (150) on the field after it is built,
so the widget says it but no validator checks it: a 300-character name reached `authenticate`,
the failed-login audit event and axes' attempt records, whose columns (150 and 255 characters)
PostgreSQL enforces (a 500, with no account needed). Here it is a form error at the field, before
any of them runs. A NUL is refused the same way by the field's own validator.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


class LoginForm(AuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].validators.append(MaxLengthValidator(self.username_field.max_length or 254))
