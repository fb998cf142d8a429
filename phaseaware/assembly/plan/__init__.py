"""ALL planning, as pure functions over integers and reliabilities: admission, order,
pads and end pad (``planner``), the pad search (``padding``) and its tabulated far prefix
(``pad_prefix``). Nothing here tokenizes or renders."""
