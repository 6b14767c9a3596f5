"""The names of the columns this tool adds to the data.

Every one carries INTERNAL_PREFIX, which the inputs refuse in a user's column, so no
name here can collide with a user column. Plain strings, no Spark import: the scoring
workers import them too.
"""

# Internal column names carry this prefix so they cannot collide with user columns.
INTERNAL_PREFIX = "__pe_"
# The row key of the prepared inputs (`EvaluationInputs.original` and `.synthetic`).
KEY = INTERNAL_PREFIX + "key"
