"""``{{ text|particles }}``: a translated sentence with its "을(를)" markers resolved by the
name before each (``portal.web.particles``)."""

from django import template

from portal.web.particles import with_particles

register = template.Library()


@register.filter(is_safe=True)
def particles(text):
    """Only particles are put in: what was escaped stays escaped."""
    return with_particles(str(text))
