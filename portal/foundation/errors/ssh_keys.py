"""A project's SSH public keys' refusals (docs/rules.md#ssh-keys), typed like every other
(``portal.foundation.errors.RuleViolation``).

Kept apart from ``portal.foundation.errors`` (at its line limit), as the API's are in
``api.py``; ``portal.models`` imports it, so it is registered wherever a key is. Every
refusal of the key's text names the form field ``public_key``.
"""

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import InvalidInput, NotFound

# What every refusal of a key's text may say of what is accepted (one place for the sizes).
MAX_KEY_BYTES = 16 * 1024
RSA_MIN_BITS, RSA_MAX_BITS = 2048, 16384


class SshKeyNotFound(NotFound):
    code = "ssh_key_not_found"
    default_message = _("SSH 키를 찾을 수 없습니다.")


class SshKeyNameTaken(InvalidInput):
    code = "ssh_key_name_taken"
    field = "name"
    default_message = _("이 프로젝트에 같은 이름의 SSH 키가 이미 있습니다.")


class SshKeyDuplicate(InvalidInput):
    code = "ssh_key_duplicate"
    field = "public_key"
    default_message = _("이 프로젝트에 같은 공개 키가 이미 등록되어 있습니다(이름: %(name)s).")


class SshKeyRefused(InvalidInput):
    """The base of every refusal of a key's text: nothing of it is saved."""

    code = "ssh_key_malformed"
    field = "public_key"
    default_message = _(
        "공개 키 형식이 올바르지 않습니다. ssh-keygen이 만든 .pub 파일의 한 줄(키 유형, "
        "base64 키, 설명)을 그대로 붙여 넣으세요."
    )


class SshKeyMalformed(SshKeyRefused):
    """Bad base64, a blob cut short or with bytes after the key, a part missing."""


class SshKeyRequired(SshKeyRefused):
    code = "ssh_key_required"
    default_message = _("공개 키를 입력하세요.")


class SshKeyTooLarge(SshKeyRefused):
    code = "ssh_key_too_large"
    default_message = _(
        "공개 키가 너무 큽니다(%(size)d바이트). 공개 키는 %(max)d바이트까지 입력할 수 있습니다."
    )


class SshKeyLineBreak(SshKeyRefused):
    code = "ssh_key_line_break"
    default_message = _(
        "공개 키는 한 줄로 입력하세요. 줄바꿈(LF, CR), NUL 같은 제어 문자는 쓸 수 없습니다."
    )


class SshKeyMany(SshKeyRefused):
    code = "ssh_key_many"
    default_message = _("공개 키는 한 번에 하나만 등록할 수 있습니다.")


class SshKeyOptions(SshKeyRefused):
    code = "ssh_key_options"
    default_message = _(
        "authorized_keys 옵션(command=, from= 등)은 쓸 수 없습니다. 키 유형(ssh-ed25519, "
        "ssh-rsa)으로 시작하는 공개 키만 입력하세요."
    )


class SshKeyTypeUnsupported(SshKeyRefused):
    code = "ssh_key_type_unsupported"
    default_message = _(
        "지원하지 않는 키 유형입니다(%(type)s). ssh-ed25519 또는 ssh-rsa(2048비트 이상) "
        "공개 키만 등록할 수 있습니다."
    )


class SshKeyTypeMismatch(SshKeyRefused):
    code = "ssh_key_type_mismatch"
    default_message = _("키 앞의 유형(%(stated)s)과 키 데이터의 유형(%(actual)s)이 다릅니다.")


class SshKeyRsaBits(SshKeyRefused):
    code = "ssh_key_rsa_bits"
    default_message = _("RSA 키는 %(min)d~%(max)d비트여야 합니다(이 키는 %(bits)d비트).")
