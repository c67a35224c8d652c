// Shows each window also in the viewer's own time zone, beside the
// schedule's: the server cannot know the viewer's zone.
const fmt = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", timeZoneName: "short",
});
document.querySelectorAll("[data-local]").forEach((el) => {
  el.textContent = " (yours: " + fmt.format(new Date(el.dataset.local)) + ")";
});
