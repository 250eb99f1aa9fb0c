"""Print a new API token for a user in a project (scripts, the README, the demo)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from portal.foundation.errors import InvalidInput
from portal.iam import tokens
from portal.models import ApiToken, Project


class Command(BaseCommand):
    help = "Issue a personal API token (vcp_…) of USER for PROJECT and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="username")
        parser.add_argument("--project", required=True, help="project slug (or id)")
        parser.add_argument("--days", type=int, default=ApiToken.DEFAULT_DAYS)
        parser.add_argument("--name", default="cli", help="what the token is for")

    def handle(self, *args, user, project, days, name, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no such user: {user}")
        found = Project.objects.filter(slug=project).first()
        if found is None and project.isdigit():
            found = Project.objects.filter(pk=int(project)).first()
        if found is None:
            raise CommandError(f"no such project: {project}")
        try:
            _token, secret = tokens.issue_token(
                user=owner, project_id=found.pk, name=name, days=days
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(secret)
