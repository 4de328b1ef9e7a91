// Reloads the page every data-refresh seconds (0: never), unless someone is
// filling in one of its forms: a field has the focus, a note is typed, or a
// verdict was picked.
(function () {
  var seconds = Number(document.body.dataset.refresh || 0);
  if (!seconds) {
    return;
  }
  function filling() {
    var a = document.activeElement;
    if (a && a.form) {
      return true;
    }
    var notes = document.querySelectorAll("input[name=note]");
    for (var i = 0; i < notes.length; i++) {
      if (notes[i].value) {
        return true;
      }
    }
    var picks = document.querySelectorAll("select");
    for (var j = 0; j < picks.length; j++) {
      if (picks[j].selectedIndex !== 0) {
        return true;
      }
    }
    return false;
  }
  setInterval(function () {
    if (!filling()) {
      location.reload();
    }
  }, seconds * 1000);
})();
